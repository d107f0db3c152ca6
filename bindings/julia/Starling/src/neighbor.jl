# Neighbor collectives. Keyword arguments (BlueFog's names) pick peers and weights:
# - none: the context's topology and its default weights (the topology's own if it was
#   set weighted, else the uniform average over self and in-neighbors);
# - self_weight + src_weights (rank => weight, a Dict or a vector of Pairs): the static
#   topology with explicit weights for the listed in-neighbors (others get 0);
# - send_ranks (or dst_weights, rank => weight) with self_weight + src_weights: this
#   call's own graph (dynamic): send to send_ranks, receive from src_weights' ranks;
#   check_topology=true verifies sends and receives match before any data moves.

"""
The C struct of a neighbor operation's arguments plus the arrays it points into.
"""
struct NeighborArgs
    ref::Base.RefValue{L.starling_neighbor_args_t}
    roots::Vector{Any}
    num_sources::Int
    dynamic::Bool
end

Base.cconvert(::Type{Ptr{L.starling_neighbor_args_t}}, a::NeighborArgs) = a
Base.unsafe_convert(::Type{Ptr{L.starling_neighbor_args_t}}, a::NeighborArgs) =
    Base.unsafe_convert(Ptr{L.starling_neighbor_args_t}, a.ref)

function NeighborArgs(; self_weight::Union{Nothing,Real}=nothing, src_weights=nothing, send_ranks=nothing,
                      dst_weights=nothing, check_topology::Bool=false, name=nothing)
    (self_weight === nothing) == (src_weights === nothing) ||
        throw(ArgumentError("self_weight and src_weights go together"))
    use_weights = self_weight !== nothing
    dynamic = send_ranks !== nothing || dst_weights !== nothing
    dynamic && !use_weights && throw(ArgumentError(
        "a dynamic neighbor operation (send_ranks or dst_weights) needs self_weight and src_weights"))
    src_ranks, src_w = ranks_weights(src_weights)
    if dst_weights === nothing
        dst_ranks = Cint[r for r in something(send_ranks, Int[])]
        dst_w = C_NULL
    else
        dst_ranks, dst_w = ranks_weights(dst_weights)
        send_ranks === nothing || sort(collect(send_ranks)) == sort(dst_ranks) ||
            throw(ArgumentError("send_ranks and dst_weights name different ranks"))
    end
    label = cname(name)
    args = L.starling_neighbor_args_t(; use_weights=Int(use_weights), self_weight=something(self_weight, 0.0),
        num_sources=length(src_ranks), source_ranks=pointer(src_ranks), source_weights=pointer(src_w),
        dynamic=Int(dynamic), num_destinations=length(dst_ranks), destination_ranks=pointer(dst_ranks),
        destination_weights=dst_w === C_NULL ? C_NULL : pointer(dst_w), check_topology=Int(check_topology),
        name=label === C_NULL ? C_NULL : pointer(label))
    return NeighborArgs(Ref(args), Any[src_ranks, src_w, dst_ranks, dst_w, label], length(src_ranks), dynamic)
end

"""
    neighbor_allreduce!(ctx, A; kwargs...) -> A
    neighbor_allreduce!(ctx, out, A; kwargs...) -> out

`out = self_weight * A + Σ_j w_j * A_j` over this rank's sources (see the keywords at
the top of this file). Collective: every rank calls it, also ranks that send and
receive nothing.
"""
neighbor_allreduce!(ctx::Context, A::AbstractArray; kwargs...) = neighbor_allreduce!(ctx, A, A; kwargs...)
function neighbor_allreduce!(ctx::Context, out::AbstractArray, A::AbstractArray; kwargs...)
    input, output = tensor_views(A, out)
    check(L.starling_neighbor_allreduce(ctx.handle, input, output, NeighborArgs(; kwargs...)))
    return out
end

"As `neighbor_allreduce!`, into a new array."
neighbor_allreduce(ctx::Context, A::AbstractArray; kwargs...) = neighbor_allreduce!(ctx, similar(A), A; kwargs...)

"Nonblocking `neighbor_allreduce!`: `wait(req)` returns `out`. Consecutive calls may be fused."
function neighbor_allreduce_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; kwargs...)
    input, output = tensor_views(A, out)
    args = NeighborArgs(; kwargs...)
    return Request(ctx, Any[input, output, args], out) do req
        L.starling_neighbor_allreduce_nonblocking(ctx.handle, input, output, args, req)
    end
end

# Sources of a neighbor allgather: dynamic, as listed; static, every in-neighbor.
source_count(ctx::Context, args::NeighborArgs) = args.dynamic ? args.num_sources : length(in_neighbors(ctx))

"""
    neighbor_allgather_first_dims(ctx, A; kwargs...) -> Vector{Int}

The sources' sizes along the last dimension, in source order.
"""
function neighbor_allgather_first_dims(ctx::Context, A::AbstractArray; kwargs...)
    args = NeighborArgs(; kwargs...)
    dims = Vector{Int64}(undef, max(ctx.size, 1))  # never fewer entries than sources
    n = source_count(ctx, args)
    check(L.starling_neighbor_allgather_first_dims(ctx.handle, TensorView(A), dims, args))
    return Int[dims[k] for k in 1:n]
end

"""
    neighbor_allgather(ctx, A; kwargs...) -> Array
    neighbor_allgather!(ctx, out, A; kwargs...) -> out

The sources' arrays concatenated along the last dimension: static, in-neighbors in
ascending rank order; dynamic, `src_weights`' ranks in order. Self is not included;
weights are ignored.
"""
function neighbor_allgather(ctx::Context, A::AbstractArray; kwargs...)
    ndims(A) >= 1 || throw(ArgumentError("neighbor_allgather needs at least one dimension"))
    dims = neighbor_allgather_first_dims(ctx, A; kwargs...)
    out = similar(A, (size(A)[1:end-1]..., sum(dims; init=0)))
    return neighbor_allgather!(ctx, out, A; kwargs...)
end

function neighbor_allgather!(ctx::Context, out::AbstractArray, A::AbstractArray; kwargs...)
    check(L.starling_neighbor_allgather(ctx.handle, TensorView(A), TensorView(out), C_NULL, NeighborArgs(; kwargs...)))
    return out
end

"Nonblocking `neighbor_allgather!`: `wait(req)` returns `out`."
function neighbor_allgather_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; kwargs...)
    input, output = TensorView(A), TensorView(out)
    args = NeighborArgs(; kwargs...)
    return Request(ctx, Any[input, output, args], out) do req
        L.starling_neighbor_allgather_nonblocking(ctx.handle, input, output, C_NULL, args, req)
    end
end

"""
    hierarchical_neighbor_allreduce!(ctx, out, A; kwargs...) -> out

Ranks average inside their machine, machines run a neighbor allreduce over the machine
topology (`set_machine_topology!`; ranks in the keywords are machine ids), and the
result is shared inside each machine. Collective.
"""
function hierarchical_neighbor_allreduce!(ctx::Context, out::AbstractArray, A::AbstractArray; kwargs...)
    input, output = tensor_views(A, out)
    check(L.starling_hierarchical_neighbor_allreduce(ctx.handle, input, output, NeighborArgs(; kwargs...)))
    return out
end

"Nonblocking `hierarchical_neighbor_allreduce!`: `wait(req)` returns `out`."
function hierarchical_neighbor_allreduce_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; kwargs...)
    input, output = tensor_views(A, out)
    args = NeighborArgs(; kwargs...)
    return Request(ctx, Any[input, output, args], out) do req
        L.starling_hierarchical_neighbor_allreduce_nonblocking(ctx.handle, input, output, args, req)
    end
end
