"""Drop-in replacement for ``bluefog.common.topology_util``.

The graphs are networkx DiGraphs as in BlueFog (edge i -> j with attribute 'weight'
means j receives i's tensor scaled by it; self-loops carry self weights), but they are
built from Starling's C++ generators, so Python and every other binding get the same
edges and weights. Differences from BlueFog (see the README): powers in
ExponentialGraph are tested exactly, invalid arguments raise :class:`TopologyError`
(both a ValueError and, as BlueFog's asserts were, an AssertionError), and the
dynamic generators check their topology instead of dividing by a wrong degree.
"""

from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import networkx as nx
import numpy as np

from .errors import InvalidArgumentError
from .topology import Schedule, Topology


class TopologyError(InvalidArgumentError, AssertionError):
    """Invalid arguments to a generator (BlueFog raised AssertionError for these)."""


def _graph(make: Any, *args: Any) -> nx.DiGraph:
    try:
        topology = make(*args)
    except InvalidArgumentError as e:
        raise TopologyError(str(e)) from None
    return topology.to_networkx()


def _from_networkx(topo: nx.DiGraph) -> Topology:
    from .context import as_topology

    try:
        return as_topology(topo)
    except InvalidArgumentError as e:
        raise TopologyError(str(e)) from None


def isPowerOf(x: int, base: int) -> bool:  # noqa: N802 (BlueFog's name)
    """True if x == base**k for some k >= 0 (exact integer test)."""
    if not isinstance(base, int) or base <= 1 or x <= 0:
        raise TopologyError(f"isPowerOf needs an int base > 1 and x > 0, got x={x!r}, base={base!r}")
    while x % base == 0:
        x //= base
    return x == 1


def ExponentialTwoGraph(size: int) -> nx.DiGraph:  # noqa: N802
    """i -> i + 2^k (mod size) for every 2^k < size, plus self; uniform weights."""
    return _graph(Topology.exponential_two, size)


def ExponentialGraph(size: int, base: int = 2) -> nx.DiGraph:  # noqa: N802
    """i -> i + base^k (mod size) for every base^k < size, plus self; uniform weights."""
    return _graph(Topology.exponential, size, base)


def SymmetricExponentialGraph(size: int, base: int = 4) -> nx.DiGraph:  # noqa: N802
    """i -> i +- base^k (mod size), plus self; uniform weights."""
    return _graph(Topology.symmetric_exponential, size, base)


def MeshGrid2DGraph(size: int, shape: Optional[Tuple[int, int]] = None) -> nx.DiGraph:  # noqa: N802
    """A grid without wrap-around, Metropolis-Hastings weights; shape None picks the
    most square shape with rows <= cols."""
    return _graph(Topology.mesh_grid_2d, size, shape)


def StarGraph(size: int, center_rank: int = 0) -> nx.DiGraph:  # noqa: N802
    """Every rank linked both ways to center_rank; weights as BlueFog's StarGraph."""
    return _graph(Topology.star, size, center_rank)


def RingGraph(size: int, connect_style: int = 0) -> nx.DiGraph:  # noqa: N802
    """connect_style 0: both directions (weights 1/3); 1: i sends to i-1; 2: to i+1."""
    return _graph(Topology.ring, size, connect_style)


def FullyConnectedGraph(size: int) -> nx.DiGraph:  # noqa: N802
    """Every rank linked to every other; uniform weights 1/size."""
    return _graph(Topology.fully_connected, size)


def IsRegularGraph(topo: nx.DiGraph) -> bool:  # noqa: N802
    """True if every node has the same degree (in + out; a self-loop counts twice)."""
    return _from_networkx(topo).is_regular()


def IsTopologyEquivalent(topo1: Optional[nx.DiGraph], topo2: Optional[nx.DiGraph]) -> bool:  # noqa: N802
    """True if both graphs have the same nodes and exactly the same weighted edges."""
    if topo1 is None or topo2 is None:
        return False
    if topo1.number_of_nodes() != topo2.number_of_nodes() or topo1.number_of_edges() != topo2.number_of_edges():
        return False
    return bool(np.array_equal(nx.to_numpy_array(topo1), nx.to_numpy_array(topo2)))


def GetRecvWeights(topo: nx.DiGraph, rank: int) -> Tuple[float, Dict[int, float]]:  # noqa: N802
    """(self weight, {in-neighbor: weight}) with which `rank` receives; the self weight
    is 0.0 without a self-loop."""
    return _from_networkx(topo).recv_weights(rank)


def GetSendWeights(topo: nx.DiGraph, rank: int) -> Tuple[float, Dict[int, float]]:  # noqa: N802
    """(self weight, {out-neighbor: weight}) with which `rank` sends."""
    return _from_networkx(topo).send_weights(rank)


def _ranks(schedule: Schedule) -> Iterator[Tuple[List[int], List[int]]]:
    # A generator function keeps the schedule (and its C handle) alive while iterated.
    for step in schedule:
        yield step


def GetDynamicOnePeerSendRecvRanks(topo: nx.DiGraph, self_rank: int) -> Iterator[Tuple[List[int], List[int]]]:  # noqa: N802
    """Endless ([send rank], [recv ranks]) per step: one out-neighbor at a time, in
    clockwise order. Every node needs a self-loop and an out-neighbor."""
    try:
        schedule = Schedule.dynamic_one_peer(_from_networkx(topo), self_rank)
    except InvalidArgumentError as e:
        raise TopologyError(str(e)) from None
    return _ranks(schedule)


def _schedule(make: Any, *args: Any) -> Iterator[Tuple[List[int], List[int]]]:
    try:
        return _ranks(make(*args))
    except InvalidArgumentError as e:
        raise TopologyError(str(e)) from None


def GetExp2DynamicSendRecvMachineRanks(world_size: int, local_size: int, self_rank: int,  # noqa: N802
                                       local_rank: int) -> Iterator[Tuple[List[int], List[int]]]:
    """Machine ids: machine m sends to m + 2^k and receives from m - 2^k."""
    return _schedule(Schedule.exp2_machine, world_size, local_size, self_rank, local_rank)


def GetInnerOuterRingDynamicSendRecvRanks(world_size: int, local_size: int,  # noqa: N802
                                          self_rank: int) -> Iterator[Tuple[List[int], List[int]]]:
    """One rank per machine (rotating) talks along the machine ring, the others along
    the ring inside their machine."""
    return _schedule(Schedule.inner_outer_ring, world_size, local_size, self_rank)


def GetInnerOuterExpo2DynamicSendRecvRanks(world_size: int, local_size: int,  # noqa: N802
                                           self_rank: int) -> Iterator[Tuple[List[int], List[int]]]:
    """As the inner-outer ring, with exponential-2 distances inside and between machines."""
    return _schedule(Schedule.inner_outer_expo2, world_size, local_size, self_rank)


def GetFastPairSendRecvRanks(link_seconds: Any, self_rank: int,  # noqa: N802
                             threshold_seconds: float) -> Iterator[Tuple[List[int], List[int]]]:
    """Starling's: ([peer], [peer]) or ([], []) per step, pairing the ranks round-robin
    over the links within threshold_seconds (Schedule.fast_pairs; average with 1/2
    each). link_seconds: the size x size matrix of Context.link_latencies(), the same
    on every rank."""
    try:
        links = np.asarray(link_seconds, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("link_seconds must be a square matrix of numbers (seconds)") from None
    size = int(links.shape[0]) if links.ndim == 2 else 0
    return _schedule(Schedule.fast_pairs, size, self_rank, links, threshold_seconds)


class AdaptiveFastPairs:
    """Starling's: the fast-pair schedule, re-measured as the job runs. An endless
    iterator of ([peer], [peer]) or ([], []) per step, as GetFastPairSendRecvRanks.

    measure() is called before the first step and then every `every` steps; it must be
    collective and give every rank the same size x size matrix (Context.link_latencies
    or starling.torch.link_latencies does). Links slower than `factor` times the median
    link are left out. When that would split the job into groups that never mix, the
    schedule uses every link until the next measurement (`split` says so), rather than
    stop training. Every rank must step its iterator alike (one next() per step).

    After each measurement: links (the matrix), threshold_seconds, split, and
    measurements (how many so far)."""

    def __init__(self, measure: Callable[[], Any], self_rank: int, *, factor: float = 8.0,
                 every: int = 100) -> None:
        if not callable(measure):
            raise TypeError(f"measure must be callable (e.g. Context.link_latencies), got {type(measure).__name__}")
        for value, what in ((self_rank, "self_rank"), (every, "every")):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{what} must be an int, got {type(value).__name__}")
        if isinstance(factor, bool) or not isinstance(factor, (int, float, np.integer, np.floating)):
            raise TypeError(f"factor must be a number, got {type(factor).__name__}")
        if not factor > 1.0:  # also refuses NaN
            raise TopologyError(f"factor is {factor}; give a number above 1 (links slower than factor x the median "
                                f"are left out)")
        if every < 1:
            raise TopologyError(f"every is {every}; give at least 1 (steps between measurements)")
        self._measure, self._rank, self._factor, self._every = measure, int(self_rank), float(factor), int(every)
        self._left = 0
        self._steps: Optional[Iterator[Tuple[List[int], List[int]]]] = None
        self.links: Optional[np.ndarray] = None
        self.threshold_seconds = float("nan")
        self.split = False
        self.measurements = 0

    def __iter__(self) -> "AdaptiveFastPairs":
        return self

    def __next__(self) -> Tuple[List[int], List[int]]:
        if self._left == 0:
            self._remeasure()
        self._left -= 1
        assert self._steps is not None
        return next(self._steps)

    def _remeasure(self) -> None:
        try:
            links = np.array(self._measure(), dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError("measure() must return a square matrix of numbers (seconds)") from None
        if links.ndim != 2 or links.shape[0] != links.shape[1] or links.shape[0] < 1:
            raise TopologyError(f"measure() returned a matrix of shape {links.shape}; it must be square")
        size = links.shape[0]
        off_diagonal = links[~np.eye(size, dtype=bool)]
        # The median of a one-rank job is undefined: any positive threshold will do.
        threshold = self._factor * float(np.median(off_diagonal)) if size > 1 else 1.0
        if not threshold > 0.0 or not np.isfinite(threshold):
            raise TopologyError(f"measure() returned links with median {threshold / self._factor}; "
                                f"link times must be positive seconds")
        # A threshold that splits the job would be refused (the parts would never mix):
        # then every link takes part.
        self.split = not nx.is_connected(nx.from_numpy_array(np.maximum(links, links.T) <= threshold))
        steps = GetFastPairSendRecvRanks(links, self._rank,
                                         float(links.max()) + 1.0 if self.split else threshold)
        self._steps, self._left = steps, self._every
        self.links, self.threshold_seconds = links, threshold
        self.measurements += 1


def GetAdaptiveFastPairSendRecvRanks(measure: Callable[[], Any], self_rank: int, *,  # noqa: N802
                                     factor: float = 8.0, every: int = 100) -> AdaptiveFastPairs:
    """Starling's: the fast-pair schedule re-measured every `every` steps (see
    AdaptiveFastPairs); measure is Context.link_latencies or starling.torch.link_latencies."""
    return AdaptiveFastPairs(measure, self_rank, factor=factor, every=every)


__all__ = [
    "GetRecvWeights", "GetSendWeights", "IsRegularGraph", "IsTopologyEquivalent", "ExponentialTwoGraph",
    "ExponentialGraph", "FullyConnectedGraph", "MeshGrid2DGraph", "RingGraph", "StarGraph",
    "SymmetricExponentialGraph", "GetDynamicOnePeerSendRecvRanks", "GetExp2DynamicSendRecvMachineRanks",
    "GetInnerOuterRingDynamicSendRecvRanks", "GetInnerOuterExpo2DynamicSendRecvRanks", "GetFastPairSendRecvRanks",
    "AdaptiveFastPairs", "GetAdaptiveFastPairSendRecvRanks", "isPowerOf", "TopologyError",
]
