"""Drop-in replacement for ``bluefog.tensorflow`` (``import starling.tensorflow as bf``),
plus the neighbor operations BlueFog's TensorFlow side lacks (neighbor_allreduce, static
and dynamic; neighbor_allgather) and KungFu's three optimizers (SynchronousSGDOptimizer,
SynchronousAveragingOptimizer, PairAveragingOptimizer). Eager TensorFlow tensors in CPU memory; inside
tf.function every operation is a tf.py_function op. docs/tensorflow.md has the details.
"""

from ..topology_util import (ExponentialGraph, ExponentialTwoGraph, FullyConnectedGraph,
                             GetDynamicOnePeerSendRecvRanks, GetRecvWeights, GetSendWeights, IsRegularGraph,
                             IsTopologyEquivalent, MeshGrid2DGraph, RingGraph, StarGraph,
                             SymmetricExponentialGraph)
from .mpi_ops import (allgather, allreduce, average_group, barrier, broadcast, in_neighbor_ranks, init,
                      is_initialized, is_topo_weighted, load_topology, local_rank, local_size, machine_rank,
                      machine_size, mpi_threads_supported, neighbor_allgather, neighbor_allreduce,
                      out_neighbor_ranks, rank, set_topology, shutdown, size)
from .averaging_optimizers import PairAveragingOptimizer, SynchronousAveragingOptimizer, SynchronousSGDOptimizer
from .optimizers import DistributedGradientTape, DistributedOptimizer, broadcast_variables

__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "machine_size",
    "machine_rank", "mpi_threads_supported", "set_topology", "load_topology", "is_topo_weighted",
    "in_neighbor_ranks", "out_neighbor_ranks", "barrier", "allreduce", "broadcast", "allgather",
    "neighbor_allreduce", "neighbor_allgather", "average_group", "broadcast_variables",
    "DistributedOptimizer", "DistributedGradientTape", "SynchronousSGDOptimizer", "SynchronousAveragingOptimizer",
    "PairAveragingOptimizer",
    "ExponentialGraph", "ExponentialTwoGraph", "FullyConnectedGraph", "MeshGrid2DGraph", "RingGraph",
    "StarGraph", "SymmetricExponentialGraph", "GetDynamicOnePeerSendRecvRanks", "GetRecvWeights",
    "GetSendWeights", "IsRegularGraph", "IsTopologyEquivalent",
]
