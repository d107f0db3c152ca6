"""Drop-in replacement for ``bluefog.tensorflow`` (``import starling.tensorflow as bf``),
plus the neighbor operations BlueFog's TensorFlow side lacks (neighbor_allreduce, static
and dynamic; neighbor_allgather) and KungFu's three optimizers (SynchronousSGDOptimizer,
SynchronousAveragingOptimizer, PairAveragingOptimizer), and starling.torch's one-sided window
operations (win_*, over a tf.Variable or a copy of a tensor). Eager TensorFlow tensors in CPU
memory; inside tf.function every collective is a tf.py_function op. docs/tensorflow.md has the
details.
"""

from ..topology_util import (ExponentialGraph, ExponentialTwoGraph, FullyConnectedGraph,
                             GetDynamicOnePeerSendRecvRanks, GetRecvWeights, GetSendWeights, IsRegularGraph,
                             IsTopologyEquivalent, MeshGrid2DGraph, RingGraph, StarGraph,
                             SymmetricExponentialGraph)
from .mpi_ops import (allgather, allgather_nonblocking, allreduce, allreduce_nonblocking, average_group, barrier,
                      broadcast, broadcast_nonblocking, in_neighbor_ranks, init, is_initialized, is_topo_weighted,
                      load_topology, local_rank, local_size, machine_rank, machine_size, mpi_threads_supported,
                      neighbor_allgather, neighbor_allgather_nonblocking, neighbor_allreduce,
                      neighbor_allreduce_nonblocking, out_neighbor_ranks, poll, rank, set_topology, shutdown, size,
                      synchronize, wait)
from .averaging_optimizers import PairAveragingOptimizer, SynchronousAveragingOptimizer, SynchronousSGDOptimizer
from .optimizers import DistributedGradientTape, DistributedOptimizer, broadcast_variables
from .win_ops import (get_current_created_window_names, get_win_version, turn_off_win_ops_with_associated_p,
                      turn_on_win_ops_with_associated_p, win_accumulate, win_accumulate_nonblocking,
                      win_associated_p, win_create, win_free, win_get, win_get_nonblocking, win_mutex, win_poll,
                      win_put, win_put_nonblocking, win_update, win_update_then_collect, win_wait)

__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "machine_size",
    "machine_rank", "mpi_threads_supported", "set_topology", "load_topology", "is_topo_weighted",
    "in_neighbor_ranks", "out_neighbor_ranks", "barrier", "allreduce", "broadcast", "allgather",
    "neighbor_allreduce", "neighbor_allgather", "average_group", "broadcast_variables",
    "allreduce_nonblocking", "broadcast_nonblocking", "allgather_nonblocking", "neighbor_allreduce_nonblocking",
    "neighbor_allgather_nonblocking", "poll", "synchronize", "wait",
    "DistributedOptimizer", "DistributedGradientTape", "SynchronousSGDOptimizer", "SynchronousAveragingOptimizer",
    "PairAveragingOptimizer",
    "win_create", "win_free", "win_update", "win_update_then_collect", "win_put", "win_put_nonblocking",
    "win_get", "win_get_nonblocking", "win_accumulate", "win_accumulate_nonblocking", "win_wait", "win_poll",
    "win_mutex", "get_win_version", "get_current_created_window_names", "win_associated_p",
    "turn_on_win_ops_with_associated_p", "turn_off_win_ops_with_associated_p",
    "ExponentialGraph", "ExponentialTwoGraph", "FullyConnectedGraph", "MeshGrid2DGraph", "RingGraph",
    "StarGraph", "SymmetricExponentialGraph", "GetDynamicOnePeerSendRecvRanks", "GetRecvWeights",
    "GetSendWeights", "IsRegularGraph", "IsTopologyEquivalent",
]
