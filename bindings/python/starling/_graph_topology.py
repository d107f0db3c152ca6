"""set_topology as BlueFog's modules (starling.torch, starling.tensorflow) have it: a
networkx graph checked, given to the context, and the module's state updated."""

from typing import Any, Optional

import networkx as nx

from . import topology_util
from ._logging import logger
from .context import Context, as_topology
from .errors import InvalidUsageError, MismatchError


def set_graph_topology(context: Context, state: Any, topology: Optional[nx.DiGraph], is_weighted: bool) -> bool:
    """Sets context's topology (None: the exponential-2 graph) and, on success, state's
    topology, is_weighted, in_ranks and out_ranks. Returns False, keeping the old
    topology, when the context refuses it (windows alive, ranks passed different graphs)."""
    size = context.size
    if topology is None:
        topology = topology_util.ExponentialGraph(size)
        logger.info("topology is not given: using the exponential-2 graph")
    if not isinstance(topology, nx.DiGraph):
        raise TypeError("topology must be a networkx.DiGraph object.")
    if topology.number_of_nodes() != size:
        raise TypeError(f"topology must have size() = {size} nodes, got {topology.number_of_nodes()}.")
    try:
        context.set_topology(as_topology(topology), bool(is_weighted))
    except (InvalidUsageError, MismatchError) as e:
        logger.error("set_topology failed, the previous topology stays: %s", e)
        return False
    state.topology, state.is_weighted = topology, bool(is_weighted)
    state.in_ranks, state.out_ranks = context.in_neighbors, context.out_neighbors
    return True
