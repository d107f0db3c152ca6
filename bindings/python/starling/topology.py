"""Topologies (weighted directed graphs over ranks) and dynamic schedules.

Every generator runs in Starling's C++ core, so Python, C, Java and Julia programs get
exactly the same edges and weights. Edge ``i -> j`` with weight ``w`` means rank ``j``
receives rank ``i``'s tensor scaled by ``w``; an edge ``r -> r`` is ``r``'s self weight.
"""

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _core
from .errors import InvalidArgumentError

Edge = Tuple[int, int, float]

_RING_STYLES = {"bidirectional": _core.STARLING_RING_BIDIRECTIONAL, "left": _core.STARLING_RING_LEFT,
                "right": _core.STARLING_RING_RIGHT}


class Topology:
    """A weighted directed graph over ``size`` ranks (a local object: no communication)."""

    __slots__ = ("_handle", "__weakref__")

    def __init__(self, size: int, edges: Iterable[Union[Tuple[int, int], Edge]]) -> None:
        """A graph from explicit edges ``(source, destination)`` (weight 1.0) or
        ``(source, destination, weight)``. Ranks must be in [0, size), weights finite
        and >= 0, and no edge may repeat."""
        sources, destinations, weights = [], [], []
        for edge in edges:
            if len(edge) not in (2, 3):
                raise ValueError(f"an edge is (source, destination) or (source, destination, weight), got {edge!r}")
            sources.append(edge[0])
            destinations.append(edge[1])
            weights.append(edge[2] if len(edge) == 3 else 1.0)
        self._handle = _core.py_topology_create(_check_size(size), sources, destinations, weights)

    @classmethod
    def _adopt(cls, handle: Any) -> "Topology":
        topology = cls.__new__(cls)
        topology._handle = handle
        return topology

    @classmethod
    def from_matrix(cls, matrix: Any) -> "Topology":
        """The graph whose edge i -> j has weight matrix[i][j] (zero entries: no edge)."""
        w = np.asarray(matrix, dtype=np.float64)
        if w.ndim != 2 or w.shape[0] != w.shape[1]:
            raise ValueError(f"a topology matrix must be square, got shape {w.shape}")
        rows, cols = np.nonzero(w)
        return cls(w.shape[0], zip(rows.tolist(), cols.tolist(), w[rows, cols].tolist()))

    # ---- generators (BlueFog's definitions; see the README for the one difference)
    @classmethod
    def exponential_two(cls, size: int) -> "Topology":
        """i -> i + 2^k (mod size) for every 2^k < size, plus self; uniform weights."""
        return cls._adopt(_core.topology_exponential_two(_check_size(size)))

    @classmethod
    def exponential(cls, size: int, base: int = 2) -> "Topology":
        """i -> i + base^k (mod size) for every base^k < size, plus self; uniform weights."""
        return cls._adopt(_core.topology_exponential(_check_size(size), _check_int(base, "base")))

    @classmethod
    def symmetric_exponential(cls, size: int, base: int = 4) -> "Topology":
        """i -> i +- base^k (mod size), plus self; uniform weights."""
        return cls._adopt(_core.topology_symmetric_exponential(_check_size(size), _check_int(base, "base")))

    @classmethod
    def mesh_grid_2d(cls, size: int, shape: Optional[Tuple[int, int]] = None) -> "Topology":
        """A rows x cols grid without wrap-around, Metropolis-Hastings weights; shape
        None picks the most square shape with rows <= cols."""
        rows, cols = (0, 0) if shape is None else (_check_int(shape[0], "rows"), _check_int(shape[1], "cols"))
        return cls._adopt(_core.topology_mesh_grid_2d(_check_size(size), rows, cols))

    @classmethod
    def star(cls, size: int, center: int = 0) -> "Topology":
        """Every rank linked both ways to `center` (BlueFog's StarGraph)."""
        return cls._adopt(_core.topology_star(_check_size(size), _check_int(center, "center")))

    @classmethod
    def ring(cls, size: int, style: Union[int, str] = 0) -> "Topology":
        """style 0 / "bidirectional" (weights 1/3), 1 / "left" (i sends to i-1), 2 /
        "right" (i sends to i+1)."""
        if isinstance(style, str):
            if style not in _RING_STYLES:
                raise ValueError(f"ring style must be one of {sorted(_RING_STYLES)} or 0, 1, 2; got {style!r}")
            style = _RING_STYLES[style]
        return cls._adopt(_core.topology_ring(_check_size(size), _check_int(style, "style")))

    @classmethod
    def fully_connected(cls, size: int) -> "Topology":
        """Every rank linked to every other, uniform weights 1/size."""
        return cls._adopt(_core.topology_fully_connected(_check_size(size)))

    # ---- queries
    @property
    def size(self) -> int:
        """The number of ranks the graph spans."""
        return _core.topology_size(self._handle)

    @property
    def num_edges(self) -> int:
        """Number of edges, self-loops included."""
        return _core.topology_num_edges(self._handle)

    @property
    def edges(self) -> List[Edge]:
        """[(source, destination, weight), ...] sorted by (source, destination)."""
        return _core.py_topology_edges(self._handle)

    def to_matrix(self) -> np.ndarray:
        """The dense weight matrix W with W[i, j] = weight of edge i -> j."""
        w = np.zeros((self.size, self.size))
        for i, j, weight in self.edges:
            w[i, j] = weight
        return w

    def to_networkx(self) -> Any:
        """A networkx.DiGraph with 'weight' attributes (BlueFog's representation)."""
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from(range(self.size))
        graph.add_weighted_edges_from(self.edges)
        return graph

    def in_neighbors(self, rank: int) -> List[int]:
        """Ranks with an edge into `rank`, ascending, self excluded."""
        return _core.py_topology_neighbors(self._handle, _check_int(rank, "rank"), 1)

    def out_neighbors(self, rank: int) -> List[int]:
        """The ranks `rank` sends to, in ascending order (self excluded)."""
        return _core.py_topology_neighbors(self._handle, _check_int(rank, "rank"), 0)

    def recv_weights(self, rank: int) -> Tuple[float, Dict[int, float]]:
        """(self weight, {in-neighbor: weight of edge neighbor -> rank})."""
        return _core.py_topology_weights(self._handle, _check_int(rank, "rank"), 1)

    def send_weights(self, rank: int) -> Tuple[float, Dict[int, float]]:
        """(self weight, {out-neighbor: weight of edge rank -> neighbor})."""
        return _core.py_topology_weights(self._handle, _check_int(rank, "rank"), 0)

    def is_regular(self) -> bool:
        """True if every rank has the same degree (in + out, a self-loop counting twice)."""
        return bool(_core.topology_is_regular(self._handle))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Topology):
            return NotImplemented
        return bool(_core.topology_is_equivalent(self._handle, other._handle))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<starling.Topology size={self.size} edges={self.num_edges}>"

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            self._handle = None
            _core.topology_free(handle)


class Schedule:
    """A dynamic topology: an endless iterator of ``([send ranks], [recv ranks])`` per
    step (BlueFog's Get*SendRecvRanks generators). Every rank advances its own
    schedule once per step, in lockstep."""

    __slots__ = ("_handle",)

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    @classmethod
    def dynamic_one_peer(cls, topology: Topology, rank: int) -> "Schedule":
        """One peer per step, cycling through the topology's out-neighbors clockwise.
        Every rank needs a self-loop and at least one out-neighbor."""
        return cls(_core.schedule_dynamic_one_peer(topology._handle, _check_int(rank, "rank")))

    @classmethod
    def exp2_machine(cls, world_size: int, local_size: int, rank: int, local_rank: int) -> "Schedule":
        """Machine ids (not ranks): machine m sends to m + 2^k, receives from m - 2^k."""
        return cls(_core.schedule_exp2_machine(world_size, local_size, rank, local_rank))

    @classmethod
    def inner_outer_ring(cls, world_size: int, local_size: int, rank: int) -> "Schedule":
        """One rank per machine (rotating) talks along the ring of machines, the others along the ring inside their machine; local_size > 2."""
        return cls(_core.schedule_inner_outer_ring(world_size, local_size, rank))

    @classmethod
    def inner_outer_expo2(cls, world_size: int, local_size: int, rank: int) -> "Schedule":
        """As inner_outer_ring, with exponential-2 distances inside and between machines."""
        return cls(_core.schedule_inner_outer_expo2(world_size, local_size, rank))

    @classmethod
    def fast_pairs(cls, world_size: int, rank: int, link_seconds: Any, threshold_seconds: float) -> "Schedule":
        """Pairwise averaging over fast links: step t pairs the ranks as round t of a
        round-robin tournament, and a pair whose link takes longer than
        ``threshold_seconds`` (either direction) sits the step out. Yields ``([peer],
        [peer])`` or ``([], [])``; average with weight 1/2 each (1 alone) and every step's
        mixing matrix is doubly stochastic. ``link_seconds``: world_size x world_size
        (nested sequences or a NumPy array), row i being rank i's time to each rank, the
        same on every rank (:meth:`Context.link_latencies` measures it). Raises
        InvalidArgumentError when the fast links leave the job split."""
        try:
            links = np.asarray(link_seconds, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError("link_seconds must be a square matrix of numbers (seconds)") from None
        if links.ndim != 2 or links.shape[0] != links.shape[1]:
            raise InvalidArgumentError(f"link_seconds must be a square matrix (world_size x world_size), "
                                       f"got shape {links.shape}")
        if isinstance(threshold_seconds, bool) or not isinstance(threshold_seconds, (int, float, np.floating,
                                                                                     np.integer)):
            raise TypeError(f"threshold_seconds must be a number, got {type(threshold_seconds).__name__}")
        return cls(_core.py_schedule_fast_pairs(_check_int(world_size, "world_size"), _check_int(rank, "rank"),
                                                links.ravel().tolist(), float(threshold_seconds)))

    def __iter__(self) -> Iterator[Tuple[List[int], List[int]]]:
        return self

    def __next__(self) -> Tuple[List[int], List[int]]:
        return _core.py_schedule_next(self._handle)

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            self._handle = None
            _core.schedule_free(handle)


def _check_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    return int(value)


def _check_size(size: Any) -> int:
    return _check_int(size, "size")


__all__ = ["Topology", "Schedule"]
