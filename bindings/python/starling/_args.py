"""Argument shapes shared by the operations: rank lists and {rank: weight} maps, in the
form the C helpers take (a dict or a list; None for "the default")."""

from typing import Any, Dict, Mapping

import numpy as np


def rank_weights(value: Any, what: str) -> Any:
    """A dict {rank: weight}, a sequence of ranks, or None, as the C helpers take them."""
    if value is None or isinstance(value, (dict, list, tuple)):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{what} must be a dict {{rank: weight}} or a list of ranks, got {type(value).__name__}")


def check_rank_keys(weights: Any, allowed: Any, message: str) -> None:
    """BlueFog's check of a window call's weights: None, or a dict / list / tuple whose
    ranks are all in `allowed`; ValueError starting with `message` otherwise."""
    if weights is None:
        return
    if not isinstance(weights, (dict, list, tuple)):
        raise ValueError(f"{message} Got {weights!r}.")
    if not set(weights).issubset(allowed):
        raise ValueError(f"{message} Allowed: {allowed}.")


def weights_dict(weights: Any, what: str) -> Dict[int, float]:
    """A {rank: weight} map as a dict."""
    if isinstance(weights, dict):
        return weights
    if isinstance(weights, Mapping):
        return dict(weights)
    raise TypeError(f"{what} must be a dict {{rank: weight}}, got {type(weights).__name__}")
