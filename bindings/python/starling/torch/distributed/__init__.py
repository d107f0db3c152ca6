"""torch.distributed over Starling: ``import starling.torch.distributed`` registers the
backend "starling", so that unmodified torch.distributed and DDP programs run over it::

    import starling.torch.distributed  # noqa: F401
    torch.distributed.init_process_group(backend="starling")
    model = DistributedDataParallel(model)

and one more line makes DDP decentralized (neighbor averaging of parameters instead of
the global gradient allreduce)::

    starling.torch.distributed.decentralize(model, optimizer)

Start the job with starlingrun or mpirun. Under them this import fills in what
torch.distributed's default env:// rendezvous reads when it is not set (RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT: rank 0's address
and a free port), which makes the import collective in that case: every rank imports
it. The backend itself never uses torch's store.
"""

import inspect
import os
import socket
from typing import Any, Optional

import torch
import torch.distributed as dist

from ...context import Context
from .. import _collectives
from ..._logging import logger
from ._process_group import StarlingProcessGroup
from .decentralized import decentralize

BACKEND = "starling"
_world: Optional[Context] = None


def world_context() -> Context:
    """The Starling context under the default group (created on first use, collective):
    starling.torch's own when it was initialized first, so that both share one engine."""
    global _world
    if _world is None or _world.closed:
        from .. import _state
        _world = _state.context if _state.context is not None else Context()
    return _world


def _launcher_env() -> Optional[tuple]:
    """(rank, size, local_rank, local_size) from Open MPI's or a PMI launcher's variables."""
    for prefix in ("OMPI_COMM_WORLD_", "PMIX_", "PMI_"):
        if prefix + "SIZE" in os.environ or prefix + "RANK" in os.environ:
            break
    else:
        return None
    env = os.environ
    rank = int(env.get("OMPI_COMM_WORLD_RANK", env.get("PMIX_RANK", env.get("PMI_RANK", "0"))))
    size = int(env.get("OMPI_COMM_WORLD_SIZE", env.get("PMI_SIZE", "1")))
    local_rank = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("MPI_LOCALRANKID", "0")))
    local_size = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env.get("MPI_LOCALNRANKS", "1")))
    return rank, size, local_rank, local_size


def _address() -> str:
    """This host's address as peers reach it (not a loopback one when there is another)."""
    host = socket.gethostname()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None, socket.AF_INET)}
    except OSError:
        return "127.0.0.1"
    usable = sorted(a for a in addresses if not a.startswith("127."))
    return usable[0] if usable else "127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _fill_rendezvous_env() -> None:
    launcher = _launcher_env()
    env = os.environ
    if launcher is None:
        return
    rank, size, local_rank, local_size = launcher
    for key, value in (("RANK", rank), ("WORLD_SIZE", size), ("LOCAL_RANK", local_rank),
                       ("LOCAL_WORLD_SIZE", local_size)):
        env.setdefault(key, str(value))
    if "MASTER_ADDR" in env and "MASTER_PORT" in env:
        return
    ctx = world_context()
    if ctx.size != size:
        return  # not one MPI job (e.g. a singleton): leave the rendezvous to the user
    text = f"{_address()}:{_free_port()}" if ctx.rank == 0 else ""
    data = torch.zeros(256, dtype=torch.uint8)
    data[:len(text)] = torch.tensor(list(text.encode()), dtype=torch.uint8)
    ctx.broadcast(data, 0, out=data)
    address, port = bytes(data.tolist()).rstrip(b"\0").decode().rsplit(":", 1)
    env.setdefault("MASTER_ADDR", address)
    env.setdefault("MASTER_PORT", port)


def _create(options: Any, backend_options: Any = None) -> StarlingProcessGroup:
    """The backend's creator (extended API: it learns the group's global ranks)."""
    rank, size = options.group_rank, options.group_size
    ranks = list(options.global_ranks_in_group or [])
    world = world_context()
    if not dist.is_initialized():
        context = world  # the default group
    else:
        context = _collectives.group_context(world, ranks or range(world.size))
    logger.debug("starling backend: group of %d ranks (rank %d)", size, rank)
    return StarlingProcessGroup(context, rank, size)


def _register() -> None:
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    kwargs = {"extended_api": True}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(BACKEND, _create, **kwargs)


_register()
_fill_rendezvous_env()

__all__ = ["BACKEND", "StarlingProcessGroup", "decentralize", "world_context"]
