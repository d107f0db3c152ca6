"""Parameter-wise optimizer updates for the adapt-then-combine optimizer: the algorithms
of torch.optim's SGD, Adam, AdamW, RMSprop, Adagrad and Adadelta applied to one
parameter as soon as its gradient is ready, keeping the optimizer's state in the same
layout as torch does (so local steps through optimizer.step() can interleave)."""

import math
from typing import Any, Dict

import torch


def _next_step(state: Dict[str, Any]) -> float:
    step = state.get("step")
    if torch.is_tensor(step):
        step += 1
        return float(step.item())
    state["step"] = (step or 0) + 1
    return float(state["step"])


def _signed(grad: torch.Tensor, group: Dict[str, Any]) -> torch.Tensor:
    return -grad if group.get("maximize", False) else grad


def _sgd_update(state: Dict[str, Any], p: torch.Tensor, grad: torch.Tensor, group: Dict[str, Any]) -> None:
    d_p = _signed(grad, group)
    if group["weight_decay"] != 0:
        d_p = d_p.add(p, alpha=group["weight_decay"])
    momentum = group["momentum"]
    if momentum != 0:
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = d_p.detach().clone()
        else:
            buf.mul_(momentum).add_(d_p, alpha=1 - group["dampening"])
        d_p = d_p.add(buf, alpha=momentum) if group["nesterov"] else buf
    p.add_(d_p, alpha=-group["lr"])


def _adam_update(state: Dict[str, Any], p: torch.Tensor, grad: torch.Tensor, group: Dict[str, Any],
                 decoupled: bool = False) -> None:
    grad = _signed(grad, group)
    amsgrad = group.get("amsgrad", False)
    if "exp_avg" not in state:
        state["step"] = torch.tensor(0.0)
        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if amsgrad:
            state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    step = _next_step(state)
    beta1, beta2 = group["betas"]
    if group["weight_decay"] != 0:
        if decoupled:
            p.mul_(1 - group["lr"] * group["weight_decay"])
        else:
            grad = grad.add(p, alpha=group["weight_decay"])
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    second = exp_avg_sq
    if amsgrad:
        torch.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
        second = state["max_exp_avg_sq"]
    denom = (second.sqrt() / math.sqrt(1 - beta2 ** step)).add_(group["eps"])
    p.addcdiv_(exp_avg, denom, value=-group["lr"] / (1 - beta1 ** step))


def _adamw_update(state: Dict[str, Any], p: torch.Tensor, grad: torch.Tensor, group: Dict[str, Any]) -> None:
    _adam_update(state, p, grad, group, decoupled=True)


def _rmsprop_update(state: Dict[str, Any], p: torch.Tensor, grad: torch.Tensor, group: Dict[str, Any]) -> None:
    grad = _signed(grad, group)
    if "square_avg" not in state:
        state["step"] = torch.tensor(0.0)
        state["square_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if group["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if group["centered"]:
            state["grad_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    _next_step(state)
    if group["weight_decay"] != 0:
        grad = grad.add(p, alpha=group["weight_decay"])
    alpha = group["alpha"]
    square_avg = state["square_avg"].mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    if group["centered"]:
        grad_avg = state["grad_avg"].mul_(alpha).add_(grad, alpha=1 - alpha)
        avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(group["eps"])
    else:
        avg = square_avg.sqrt().add_(group["eps"])
    if group["momentum"] > 0:
        buf = state["momentum_buffer"].mul_(group["momentum"]).addcdiv_(grad, avg)
        p.add_(buf, alpha=-group["lr"])
    else:
        p.addcdiv_(grad, avg, value=-group["lr"])


def _adagrad_update(state: Dict[str, Any], p: torch.Tensor, grad: torch.Tensor, group: Dict[str, Any]) -> None:
    grad = _signed(grad, group)
    if "sum" not in state:
        state["step"] = torch.tensor(0.0)
        state["sum"] = torch.full_like(p, group["initial_accumulator_value"], memory_format=torch.preserve_format)
    step = _next_step(state)
    if group["weight_decay"] != 0:
        grad = grad.add(p, alpha=group["weight_decay"])
    clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
    state["sum"].addcmul_(grad, grad, value=1)
    p.addcdiv_(grad, state["sum"].sqrt().add_(group["eps"]), value=-clr)


def _adadelta_update(state: Dict[str, Any], p: torch.Tensor, grad: torch.Tensor, group: Dict[str, Any]) -> None:
    grad = _signed(grad, group)
    if "square_avg" not in state:
        state["step"] = torch.tensor(0.0)
        state["square_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["acc_delta"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    _next_step(state)
    if group["weight_decay"] != 0:
        grad = grad.add(p, alpha=group["weight_decay"])
    rho, eps = group["rho"], group["eps"]
    square_avg = state["square_avg"].mul_(rho).addcmul_(grad, grad, value=1 - rho)
    delta = state["acc_delta"].add(eps).sqrt_().div_(square_avg.add(eps).sqrt_()).mul_(grad)
    state["acc_delta"].mul_(rho).addcmul_(delta, delta, value=1 - rho)
    p.add_(delta, alpha=-group["lr"])


# AdamW before Adam: in some torch versions AdamW subclasses Adam.
STEP_FUNCTIONS = [(torch.optim.AdamW, _adamw_update), (torch.optim.Adam, _adam_update),
                   (torch.optim.SGD, _sgd_update), (torch.optim.RMSprop, _rmsprop_update),
                   (torch.optim.Adagrad, _adagrad_update), (torch.optim.Adadelta, _adadelta_update)]
