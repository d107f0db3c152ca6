"""
    Topology

A weighted directed graph over ranks: an edge `i => j` with weight `w` means rank `j`
receives rank `i`'s array scaled by `w`; `i => i` is `i`'s self weight. Local (no
communication). Build one with a generator (`exponential_two_topology(n)`, ...) or
`Topology(n, sources, destinations[, weights])`. Freed by `close` or, being local,
by its finalizer.
"""
mutable struct Topology
    handle::L.starling_topology_t
    function Topology(handle::L.starling_topology_t)
        t = new(handle)
        finalizer(free_topology, t)
        return t
    end
end

function free_topology(t::Topology)
    if t.handle != C_NULL
        L.starling_topology_free(t.handle)
        t.handle = C_NULL
    end
    return nothing
end

Base.close(t::Topology) = free_topology(t)

function handle(t::Topology)
    t.handle == C_NULL && throw(StarlingError(L.STARLING_ERR_INVALID_HANDLE, "the topology was closed"))
    return t.handle
end

function make_topology(f::Function)
    out = Ref{L.starling_topology_t}(C_NULL)
    check(f(out))
    return Topology(out[])
end

"Edges `sources[k] => destinations[k]` with `weights[k]` (all 1.0 when omitted)."
function Topology(size::Integer, sources::AbstractVector{<:Integer}, destinations::AbstractVector{<:Integer},
                  weights::Union{Nothing,AbstractVector{<:Real}}=nothing)
    length(sources) == length(destinations) || throw(ArgumentError("sources and destinations differ in length"))
    weights === nothing || length(weights) == length(sources) ||
        throw(ArgumentError("weights needs one entry per edge"))
    src = Cint[s for s in sources]
    dst = Cint[d for d in destinations]
    w = weights === nothing ? C_NULL : Cdouble[x for x in weights]
    return make_topology(out -> L.starling_topology_create(size, length(src), src, dst, w, out))
end

"i => i + 2^k (mod n) plus self, uniform weights."
exponential_two_topology(n::Integer) = make_topology(out -> L.starling_topology_exponential_two(n, out))
"i => i + base^k (mod n) plus self, uniform weights."
exponential_topology(n::Integer, base::Integer) = make_topology(out -> L.starling_topology_exponential(n, base, out))
"i => i ± base^k (mod n) plus self, uniform weights."
symmetric_exponential_topology(n::Integer, base::Integer) =
    make_topology(out -> L.starling_topology_symmetric_exponential(n, base, out))
"A rows × cols grid with Metropolis-Hastings weights (0, 0: the most square shape)."
mesh_grid_2d_topology(n::Integer; rows::Integer=0, cols::Integer=0) =
    make_topology(out -> L.starling_topology_mesh_grid_2d(n, rows, cols, out))
"Every rank linked both ways to `center` (BlueFog's `StarGraph`)."
star_topology(n::Integer; center::Integer=0) = make_topology(out -> L.starling_topology_star(n, center, out))
"Every rank linked to every other, uniform weights `1/n`."
fully_connected_topology(n::Integer) = make_topology(out -> L.starling_topology_fully_connected(n, out))

const RING_STYLES = Dict(:bidirectional => L.STARLING_RING_BIDIRECTIONAL, :left => L.STARLING_RING_LEFT,
                         :right => L.STARLING_RING_RIGHT)

"Ring: `:bidirectional` (weights 1/3), `:left` (i sends to i-1) or `:right` (to i+1), weights 1/2."
function ring_topology(n::Integer; style::Symbol=:bidirectional)
    haskey(RING_STYLES, style) || throw(ArgumentError("style must be :bidirectional, :left or :right"))
    return make_topology(out -> L.starling_topology_ring(n, RING_STYLES[style], out))
end

function int_out(f::Function)
    out = Ref{Cint}(0)
    check(f(out))
    return Int(out[])
end

"Number of ranks of the graph."
nranks(t::Topology) = int_out(out -> L.starling_topology_size(handle(t), out))
"Number of edges, self-loops included."
num_edges(t::Topology) = int_out(out -> L.starling_topology_num_edges(handle(t), out))
"`true` if every rank has the same degree (in + out, a self-loop counting twice)."
isregular(t::Topology) = int_out(out -> L.starling_topology_is_regular(handle(t), out)) != 0
"Same size and exactly the same weighted edges."
isequivalent(a::Topology, b::Topology) = int_out(out -> L.starling_topology_is_equivalent(handle(a), handle(b), out)) != 0

"Every edge as `(source, destination, weight)`, sorted."
function edges(t::Topology)
    n = num_edges(t)
    src = Vector{Cint}(undef, n)
    dst = Vector{Cint}(undef, n)
    w = Vector{Cdouble}(undef, n)
    check(L.starling_topology_edges(handle(t), src, dst, w, n))
    return [(Int(src[k]), Int(dst[k]), w[k]) for k in 1:n]
end

"`W[i + 1, j + 1]` = weight of edge `i => j` (Julia indices are 1-based, ranks 0-based)."
function weight_matrix(t::Topology)
    n = nranks(t)
    W = zeros(n, n)
    for (i, j, w) in edges(t)
        W[i + 1, j + 1] = w
    end
    return W
end

# A rank list through the C "list convention": capacity = the array's length.
function rank_list(f::Function, capacity::Integer)
    ranks = Vector{Cint}(undef, max(capacity, 1))
    count = Ref{Cint}(0)
    check(f(ranks, length(ranks), count))
    return Int[ranks[k] for k in 1:count[]]
end

in_neighbors(t::Topology, rank::Integer) =
    rank_list((r, c, n) -> L.starling_topology_in_neighbors(handle(t), rank, r, c, n), nranks(t))
out_neighbors(t::Topology, rank::Integer) =
    rank_list((r, c, n) -> L.starling_topology_out_neighbors(handle(t), rank, r, c, n), nranks(t))

function weights_of(f::Function, t::Topology, rank::Integer)
    capacity = max(nranks(t), 1)
    self = Ref{Cdouble}(0)
    ranks = Vector{Cint}(undef, capacity)
    weights = Vector{Cdouble}(undef, capacity)
    count = Ref{Cint}(0)
    check(f(handle(t), rank, self, ranks, weights, capacity, count))
    return self[], Dict{Int,Float64}(Int(ranks[k]) => weights[k] for k in 1:count[])
end

"`(self_weight, Dict(in_neighbor => weight))` that `rank` receives with."
recv_weights(t::Topology, rank::Integer) = weights_of(L.starling_topology_recv_weights, t, rank)
"`(self_weight, Dict(out_neighbor => weight))` that `rank` sends with."
send_weights(t::Topology, rank::Integer) = weights_of(L.starling_topology_send_weights, t, rank)

# ---- the context's topology

"Sets the graph of neighbor operations; `weighted`: they default to its weights. Collective."
function set_topology!(ctx::Context, t::Topology; weighted::Bool=false)
    check(L.starling_set_topology(ctx.handle, handle(t), Cint(weighted)))
    return ctx
end

"A copy of the context's topology."
topology(ctx::Context) = make_topology(out -> L.starling_get_topology(ctx.handle, out, C_NULL))

"`true` when the context's topology was set weighted (operations default to its weights)."
function is_topology_weighted(ctx::Context)
    flag = Ref{Cint}(0)
    t = make_topology(out -> L.starling_get_topology(ctx.handle, out, flag))
    close(t)
    return flag[] != 0
end

"Sets the machine graph of `hierarchical_neighbor_allreduce!`. Collective."
function set_machine_topology!(ctx::Context, t::Topology; weighted::Bool=false)
    check(L.starling_set_machine_topology(ctx.handle, handle(t), Cint(weighted)))
    return ctx
end

"A copy of the machine topology, or `nothing`."
function machine_topology(ctx::Context)
    out = Ref{L.starling_topology_t}(C_NULL)
    check(L.starling_get_machine_topology(ctx.handle, out, C_NULL))
    return out[] == C_NULL ? nothing : Topology(out[])
end

"This rank's in-neighbors in the context's topology."
in_neighbors(ctx::Context) = rank_list((r, c, n) -> L.starling_in_neighbors(ctx.handle, r, c, n), ctx.size)
"This rank's out-neighbors in the context's topology."
out_neighbors(ctx::Context) = rank_list((r, c, n) -> L.starling_out_neighbors(ctx.handle, r, c, n), ctx.size)

# ---- dynamic schedules

"""
    Schedule

Per step, the ranks (or machines) this rank sends to and receives from. `next!(s)`
returns `(send, recv)` and advances; a Schedule is also an infinite iterator. Every
rank advances its own schedule once per step.
"""
mutable struct Schedule
    handle::L.starling_schedule_t
    capacity::Int
    function Schedule(handle::L.starling_schedule_t, capacity::Integer)
        s = new(handle, max(capacity, 1))
        finalizer(close, s)
        return s
    end
end

function Base.close(s::Schedule)
    if s.handle != C_NULL
        L.starling_schedule_free(s.handle)
        s.handle = C_NULL
    end
    return nothing
end

function make_schedule(f::Function, capacity::Integer)
    out = Ref{L.starling_schedule_t}(C_NULL)
    check(f(out))
    return Schedule(out[], capacity)
end

"One peer per step, cycling through `t`'s out-neighbors of `rank` clockwise."
dynamic_one_peer_schedule(t::Topology, rank::Integer) =
    make_schedule(out -> L.starling_schedule_dynamic_one_peer(handle(t), rank, out), nranks(t))
"Machine ids: machine m sends to m + 2^k and receives from m - 2^k."
exp2_machine_schedule(world_size::Integer, local_size::Integer, rank::Integer, local_rank::Integer) =
    make_schedule(out -> L.starling_schedule_exp2_machine(world_size, local_size, rank, local_rank, out), world_size)
"One rank per machine (rotating) talks along the machine ring, the others inside their machine."
inner_outer_ring_schedule(world_size::Integer, local_size::Integer, rank::Integer) =
    make_schedule(out -> L.starling_schedule_inner_outer_ring(world_size, local_size, rank, out), world_size)
"As `inner_outer_ring_schedule` with exponential-2 distances."
inner_outer_expo2_schedule(world_size::Integer, local_size::Integer, rank::Integer) =
    make_schedule(out -> L.starling_schedule_inner_outer_expo2(world_size, local_size, rank, out), world_size)

"""
    fast_pairs_schedule(world_size, rank, link_seconds, threshold_seconds)

Pairwise averaging over fast links: step t pairs the ranks as round t of a round-robin
tournament; a pair whose link takes longer than `threshold_seconds` (either direction)
sits the step out. Steps are `([peer], [peer])` or `([], [])`: average with 1/2 each (1
alone) and every step's mixing matrix is doubly stochastic. `link_seconds[i, j]`: rank
`i - 1`'s time to rank `j - 1` (`link_latencies(ctx)`), the same on every rank.
"""
function fast_pairs_schedule(world_size::Integer, rank::Integer, link_seconds::AbstractMatrix{<:Real},
                             threshold_seconds::Real)
    # Row-major for C: row i (rank i's figures) contiguous.
    flat = Vector{Float64}(vec(permutedims(Float64.(link_seconds))))
    return make_schedule(out -> L.starling_schedule_fast_pairs(world_size, rank, flat, length(flat),
                                                               threshold_seconds, out), world_size)
end

"The next step's `(send_ranks, recv_ranks)` of a schedule; advances it."
function next!(s::Schedule)
    s.handle == C_NULL && throw(StarlingError(L.STARLING_ERR_INVALID_HANDLE, "the schedule was closed"))
    send = Vector{Cint}(undef, s.capacity)
    recv = Vector{Cint}(undef, s.capacity)
    nsend = Ref{Cint}(0)
    nrecv = Ref{Cint}(0)
    check(L.starling_schedule_next(s.handle, send, s.capacity, nsend, recv, s.capacity, nrecv))
    return Int[send[k] for k in 1:nsend[]], Int[recv[k] for k in 1:nrecv[]]
end

Base.iterate(s::Schedule, state=nothing) = (next!(s), nothing)
Base.IteratorSize(::Type{Schedule}) = Base.IsInfinite()
Base.eltype(::Type{Schedule}) = Tuple{Vector{Int},Vector{Int}}
