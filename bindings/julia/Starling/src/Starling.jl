"""
    Starling

Decentralized collective communication for Julia arrays: neighbor averaging over static
or per-call (dynamic) graphs, one-sided windows, and the classic collectives, through
Starling's C ABI (`LibStarling`, generated from the C header).

Conventions:
- ranks are 0-based, as in MPI;
- functions ending in `!` write into their array arguments; nonblocking ones return a
  [`Request`](@ref) that keeps its arrays alive until it completes;
- Julia arrays are column-major: an `n1 × … × nk` array is Starling's row-major tensor of
  shape `(nk, …, n1)`, so operations along Starling's dimension 0 (allgather) work along
  the array's **last** dimension;
- failures throw [`StarlingError`](@ref); collective calls must be made by every rank in
  the same order; contexts and windows are closed explicitly (collectively), never by a
  finalizer.

The library is found through `ENV["STARLING_LIBRARY"]` (a path to `libstarling.so.0`) or
the dynamic loader's search path (`LD_LIBRARY_PATH`).
"""
module Starling

using Libdl

include("LibStarling.jl")
import .LibStarling
const L = LibStarling

export Context, Request, StarlingError, Topology, Schedule, Window
export abort!, abandon!, fault_tolerant, repair!, grow!, shrink!, joined
export local_rank, local_size, machine_rank, machine_size, is_homogeneous, stats, peer_stats, probe_peers
export gpu_path, set_cuda_stream!, cuda_stream
export timeline_enabled, timeline_start_activity, timeline_end_activity, timeline_activity
export test, barrier, barrier_nonblocking
export allreduce!, allreduce, allreduce_nonblocking!, bcast!, bcast_nonblocking!
export allgather, allgather!, allgather_nonblocking!, allgather_first_dims, allgather_first_dims_nonblocking
export reduce_scatter!, reduce_scatter_nonblocking!, alltoall!, alltoall_nonblocking!, split
export local_allreduce!, local_allreduce_nonblocking!, pair_gossip!, pair_gossip_nonblocking!
export neighbor_allreduce!, neighbor_allreduce, neighbor_allreduce_nonblocking!
export Compression, allreduce_compressed!, allreduce_compressed_nonblocking!, neighbor_allreduce_compressed!
export neighbor_allreduce_compressed_nonblocking!, compression_reset!
export neighbor_allgather, neighbor_allgather!, neighbor_allgather_nonblocking!, neighbor_allgather_first_dims
export hierarchical_neighbor_allreduce!, hierarchical_neighbor_allreduce_nonblocking!
export set_topology!, topology, is_topology_weighted, set_machine_topology!, machine_topology
export in_neighbors, out_neighbors, recv_weights, send_weights, edges, weight_matrix, num_edges, nranks
export isregular, isequivalent
export exponential_two_topology, exponential_topology, symmetric_exponential_topology
export mesh_grid_2d_topology, star_topology, ring_topology, fully_connected_topology
export dynamic_one_peer_schedule, exp2_machine_schedule, inner_outer_ring_schedule, inner_outer_expo2_schedule, next!
export fast_pairs_schedule, link_latencies
export window, window_names, win_put!, win_put_nonblocking!, win_accumulate!, win_accumulate_nonblocking!
export win_get!, win_get_nonblocking!, win_update!, win_update_then_collect!, win_versions
export win_mutex_acquire, win_mutex_release, associated_p, set_associated_p!, set_window_associated_p_enabled!

include("errors.jl")
include("tensors.jl")
include("requests.jl")
include("context.jl")
include("topology.jl")
include("collectives.jl")
include("neighbor.jl")
include("compression.jl")
include("windows.jl")
include("faults.jl")

function __init__()
    # RTLD_GLOBAL: ccall((:f, "libstarling.so.0")) then resolves to this copy by SONAME,
    # and Open MPI's plugins see libmpi's symbols.
    path = get(ENV, "STARLING_LIBRARY", L.libstarling)
    Libdl.dlopen(path, Libdl.RTLD_LAZY | Libdl.RTLD_GLOBAL)
    version = L.starling_get_version()
    if version ÷ 10000 != L.STARLING_VERSION_MAJOR
        @warn "libstarling is version $version but Starling.jl was generated for $(L.STARLING_VERSION_CODE)"
    end
end

end # module Starling
