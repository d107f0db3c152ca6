"""BlueFog's collective topology helpers (bluefog.torch.topology_util): each rank names
its destinations (or sources) and learns the other direction from everyone's lists."""

from typing import Any, Dict, List, Tuple, Union

import numpy as np
import torch

from ..topology_util import TopologyError
from . import mpi_ops


def _check_ranks(ranks: Any, what: str) -> List[int]:
    size, me = mpi_ops.size(), mpi_ops.rank()
    problem = None
    if not isinstance(ranks, (list, tuple, np.ndarray)):
        problem = f"expected a list of ranks, got {type(ranks).__name__}"
    else:
        ranks = list(ranks)
        if not all(isinstance(r, (int, np.integer)) and not isinstance(r, bool) for r in ranks):
            problem = "ranks must be integers"
        elif not all(0 <= r < size for r in ranks):
            problem = f"ranks must be in [0, {size})"
        elif len(set(ranks)) != len(ranks):
            problem = "ranks must be unique"
        elif me in ranks:
            problem = f"this rank ({me}) must not be in the list"
    if problem is not None:
        raise TopologyError(f"The format of {what} is wrong: {problem}")
    return [int(r) for r in ranks]


def _everyones_lists(ranks: List[int]) -> Dict[int, List[int]]:
    degrees = mpi_ops.allgather(torch.tensor([len(ranks)], dtype=torch.int32), name="topology.degrees")
    flat = mpi_ops.allgather(torch.tensor(ranks, dtype=torch.int32), name="topology.ranks")
    lists, start = {}, 0
    for r, degree in enumerate(degrees.tolist()):
        lists[r] = sorted(flat[start:start + degree].tolist())
        start += degree
    return lists


def _infer(ranks: Any, what: str, construct_adjacency_matrix: bool, ranks_are_destinations: bool
           ) -> Union[List[int], Tuple[List[int], np.ndarray]]:
    lists = _everyones_lists(_check_ranks(ranks, what))
    me = mpi_ops.rank()
    result = [k for k in sorted(lists) if me in lists[k]]
    if not construct_adjacency_matrix:
        return result
    size = mpi_ops.size()
    w = np.eye(size)
    for k, targets in lists.items():
        w[k, targets] = 1.0
    if not ranks_are_destinations:
        w = w.T
    # W[i, j]: edge i -> j. Each receiver's weights (a column) sum to 1.
    return result, w / w.sum(axis=0, keepdims=True)


def InferSourceFromDestinationRanks(dst_ranks: Any, construct_adjacency_matrix: bool = False  # noqa: N802
                                    ) -> Union[List[int], Tuple[List[int], np.ndarray]]:
    """Collective: every rank gives the ranks it sends to and gets the ranks that send to
    it (ascending); with construct_adjacency_matrix also the weight matrix W (W[i, j]:
    edge i -> j, uniform weights per receiver, self included)."""
    return _infer(dst_ranks, "dst_ranks", construct_adjacency_matrix, True)


def InferDestinationFromSourceRanks(src_ranks: Any, construct_adjacency_matrix: bool = False  # noqa: N802
                                    ) -> Union[List[int], Tuple[List[int], np.ndarray]]:
    """Collective: every rank gives the ranks it receives from and gets the ranks it must
    send to (ascending); with construct_adjacency_matrix also W as above."""
    return _infer(src_ranks, "src_ranks", construct_adjacency_matrix, False)


__all__ = ["InferSourceFromDestinationRanks", "InferDestinationFromSourceRanks"]
