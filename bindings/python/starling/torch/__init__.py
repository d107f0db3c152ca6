"""Drop-in replacement for ``bluefog.torch`` (``import starling.torch as bf``) and for
``horovod.torch`` (``import starling.torch as hvd``); the torch.distributed backend is
starling.torch.distributed.

Every public name of bluefog.torch is here with the same arguments, defaults, return
types and errors, plus the names BlueFog defined but did not export (pair_gossip,
win_lock, is_topo_weighted, is_machine_topo_weighted, the push-sum and pull-get
optimizers). bindings/python/README.md lists every deliberate difference.
"""

from ..topology_util import (AdaptiveFastPairs, ExponentialGraph, ExponentialTwoGraph, FullyConnectedGraph,
                             GetDynamicOnePeerSendRecvRanks, GetExp2DynamicSendRecvMachineRanks,
                             GetAdaptiveFastPairSendRecvRanks, GetFastPairSendRecvRanks,
                             GetInnerOuterExpo2DynamicSendRecvRanks, GetInnerOuterRingDynamicSendRecvRanks,
                             GetRecvWeights, GetSendWeights, IsRegularGraph, IsTopologyEquivalent, MeshGrid2DGraph,
                             RingGraph, StarGraph, SymmetricExponentialGraph)
from . import (adaptive_optimizer, compressed_optimizers, decentralized_optimizers, mpi_ops, optimizers, topology_util,
               utility)
from .adaptive_optimizer import AdaptiveSGD, DistributedAdaptiveSGDOptimizer
from .compressed_optimizers import DistributedChocoSGDOptimizer, DistributedCompressedGradientAllreduceOptimizer
from .decentralized_optimizers import *  # noqa: F401,F403
from .mpi_ops import *  # noqa: F401,F403
from .mpi_ops import __all__ as _ops
from .optimizers import (CommunicationType, DistributedAdaptThenCombineOptimizer,
                         DistributedAdaptWithCombineOptimizer, DistributedAllreduceOptimizer,
                         DistributedGradientAllreduceOptimizer, DistributedHierarchicalNeighborAllreduceOptimizer,
                         DistributedNeighborAllreduceOptimizer, DistributedPullGetOptimizer,
                         DistributedPushSumOptimizer, DistributedWinPutOptimizer)
from .topology_util import InferDestinationFromSourceRanks, InferSourceFromDestinationRanks
from .utility import allreduce_parameters, broadcast_optimizer_state, broadcast_parameters
# Horovod's API beside BlueFog's: where both name a function (allreduce, ...), horovod's
# version takes both forms (see starling/torch/horovod.py).
from . import horovod
from .horovod import *  # noqa: F401,F403,E402
from .horovod_optimizer import DistributedOptimizer
from .monitor import GradientMonitor, consensus_distance, monitor_gradients

__all__ = list(_ops) + list(optimizers.__all__) + list(decentralized_optimizers.__all__) + list(
    adaptive_optimizer.__all__) + list(
    compressed_optimizers.__all__) + [
    "broadcast_optimizer_state", "broadcast_parameters", "allreduce_parameters",
    "GetRecvWeights", "GetSendWeights", "IsRegularGraph", "IsTopologyEquivalent", "ExponentialTwoGraph",
    "ExponentialGraph", "FullyConnectedGraph", "MeshGrid2DGraph", "RingGraph", "StarGraph",
    "SymmetricExponentialGraph", "GetDynamicOnePeerSendRecvRanks", "GetExp2DynamicSendRecvMachineRanks",
    "GetInnerOuterRingDynamicSendRecvRanks", "GetInnerOuterExpo2DynamicSendRecvRanks", "GetFastPairSendRecvRanks",
    "AdaptiveFastPairs", "GetAdaptiveFastPairSendRecvRanks", "InferSourceFromDestinationRanks", "InferDestinationFromSourceRanks",
] + [name for name in horovod.__all__ if name not in _ops] + ["DistributedOptimizer",
                                                                      "GradientMonitor", "monitor_gradients", "consensus_distance"]
