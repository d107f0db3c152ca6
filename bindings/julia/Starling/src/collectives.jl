# Classic collectives. Each is collective over the context (every rank, same order);
# `name` labels the operation in diagnostics and the timeline.

const REDUCE_OPS = Dict(:sum => L.STARLING_SUM, :average => L.STARLING_AVERAGE, :avg => L.STARLING_AVERAGE,
                        :min => L.STARLING_MIN, :max => L.STARLING_MAX)

function reduce_op(op::Symbol)
    haskey(REDUCE_OPS, op) || throw(ArgumentError("op must be :sum, :average, :min or :max, not :$op"))
    return REDUCE_OPS[op]
end

"""
    allreduce!(ctx, A; op=:sum, name=nothing) -> A
    allreduce!(ctx, out, A; op=:sum, name=nothing) -> out

`out` = `op` over every rank's `A` (elementwise). `:average` needs floating-point
elements; integer sums wrap around.
"""
allreduce!(ctx::Context, A::AbstractArray; kwargs...) = allreduce!(ctx, A, A; kwargs...)
function allreduce!(ctx::Context, out::AbstractArray, A::AbstractArray; op::Symbol=:sum, name=nothing)
    input, output = tensor_views(A, out)
    check(L.starling_allreduce(ctx.handle, input, output, reduce_op(op), cname(name)))
    return out
end

"As `allreduce!`, into a new array."
allreduce(ctx::Context, A::AbstractArray; kwargs...) = allreduce!(ctx, similar(A), A; kwargs...)

"Nonblocking `allreduce!`: `wait(req)` returns `out`."
function allreduce_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; op::Symbol=:sum, name=nothing)
    input, output = tensor_views(A, out)
    label = cname(name)
    code = reduce_op(op)
    return Request(ctx, Any[input, output, label], out) do req
        L.starling_allreduce_nonblocking(ctx.handle, input, output, code, label, req)
    end
end

"""
    bcast!(ctx, A; root=0, name=nothing) -> A
    bcast!(ctx, out, A; root=0, name=nothing) -> out

Every rank's `out` = `root`'s `A`.
"""
bcast!(ctx::Context, A::AbstractArray; kwargs...) = bcast!(ctx, A, A; kwargs...)
function bcast!(ctx::Context, out::AbstractArray, A::AbstractArray; root::Integer=0, name=nothing)
    input, output = tensor_views(A, out)
    check(L.starling_broadcast(ctx.handle, input, output, root, cname(name)))
    return out
end

"Nonblocking `bcast!`: `wait(req)` returns `A`."
function bcast_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; root::Integer=0, name=nothing)
    input, output = tensor_views(A, out)
    label = cname(name)
    return Request(ctx, Any[input, output, label], out) do req
        L.starling_broadcast_nonblocking(ctx.handle, input, output, root, label, req)
    end
end

count_vector(ctx::Context, ::Nothing, what) = C_NULL
function count_vector(ctx::Context, counts::AbstractVector{<:Integer}, what)
    length(counts) == ctx.size ||
        throw(ArgumentError("$what has $(length(counts)) entries but the context has $(ctx.size) ranks"))
    return Vector{Int64}(counts)
end

"""
    reduce_scatter!(ctx, out, A; op=:sum, counts=nothing, name=nothing) -> out

`out` = this rank's block of `op` over every rank's `A`, blocks in rank order over `A`'s
elements in memory order: equal (`length(A) == ctx.size * length(out)`) or `counts[r]`
elements for rank `r` (the same on every rank). `out` may be this rank's block of `A`.
"""
function reduce_scatter!(ctx::Context, out::AbstractArray, A::AbstractArray; op::Symbol=:sum, counts=nothing,
                         name=nothing)
    input, output = tensor_views(A, out)
    check(L.starling_reduce_scatter(ctx.handle, input, output, count_vector(ctx, counts, "counts"), reduce_op(op),
                                    cname(name)))
    return out
end

"Nonblocking `reduce_scatter!`: `wait(req)` returns `out`."
function reduce_scatter_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; op::Symbol=:sum,
                                     counts=nothing, name=nothing)
    input, output = tensor_views(A, out)
    label = cname(name)
    code = reduce_op(op)
    c = count_vector(ctx, counts, "counts")
    return Request(ctx, Any[input, output, label], out) do req
        L.starling_reduce_scatter_nonblocking(ctx.handle, input, output, c, code, label, req)
    end
end

"""
    alltoall!(ctx, out, A; send_counts=nothing, recv_counts=nothing, name=nothing) -> out

Block `q` of `A` goes to rank `q`; block `q` of `out` comes from rank `q` (blocks over
the elements in memory order). Equal blocks, or `send_counts`/`recv_counts` elements
(both given; `recv_counts[q]` here equals `send_counts[rank]` on rank `q`).
"""
function alltoall!(ctx::Context, out::AbstractArray, A::AbstractArray; send_counts=nothing, recv_counts=nothing,
                   name=nothing)
    input, output = tensor_views(A, out)
    check(L.starling_alltoall(ctx.handle, input, output, count_vector(ctx, send_counts, "send_counts"),
                              count_vector(ctx, recv_counts, "recv_counts"), cname(name)))
    return out
end

"Nonblocking `alltoall!`: `wait(req)` returns `out`."
function alltoall_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; send_counts=nothing,
                               recv_counts=nothing, name=nothing)
    input, output = tensor_views(A, out)
    label = cname(name)
    s = count_vector(ctx, send_counts, "send_counts")
    r = count_vector(ctx, recv_counts, "recv_counts")
    return Request(ctx, Any[input, output, label], out) do req
        L.starling_alltoall_nonblocking(ctx.handle, input, output, s, r, label, req)
    end
end

"""
    allgather_first_dims(ctx, A) -> Vector{Int}

Every rank's size along the last dimension of `A` (Starling's first dimension), checking
that the other dimensions and the element type agree.
"""
function allgather_first_dims(ctx::Context, A::AbstractArray; name=nothing)
    dims = Vector{Int64}(undef, ctx.size)
    check(L.starling_allgather_first_dims(ctx.handle, TensorView(A), dims, cname(name)))
    return Int.(dims)
end

"Nonblocking `allgather_first_dims`: `wait(req)` returns the sizes."
function allgather_first_dims_nonblocking(ctx::Context, A::AbstractArray; name=nothing)
    input = TensorView(A)
    dims = Vector{Int64}(undef, ctx.size)
    label = cname(name)
    return Request(ctx, Any[input, dims, label], dims) do req
        L.starling_allgather_first_dims_nonblocking(ctx.handle, input, dims, label, req)
    end
end

"""
    allgather(ctx, A) -> Array
    allgather!(ctx, out, A) -> out

Concatenates every rank's `A` along the **last** dimension, in rank order (column-major
arrays: Starling's dimension 0). The last dimension may differ between ranks.
`allgather` sizes the result with `allgather_first_dims` (two collectives).
"""
function allgather(ctx::Context, A::AbstractArray; name=nothing)
    ndims(A) >= 1 || throw(ArgumentError("allgather needs at least one dimension"))
    dims = allgather_first_dims(ctx, A)
    out = similar(A, (size(A)[1:end-1]..., sum(dims)))
    return allgather!(ctx, out, A; name=name)
end

function allgather!(ctx::Context, out::AbstractArray, A::AbstractArray; name=nothing)
    check(L.starling_allgather(ctx.handle, TensorView(A), TensorView(out), C_NULL, cname(name)))
    return out
end

"Nonblocking `allgather!`: `wait(req)` returns `out`."
function allgather_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; name=nothing)
    input, output = TensorView(A), TensorView(out)
    label = cname(name)
    return Request(ctx, Any[input, output, label], out) do req
        L.starling_allgather_nonblocking(ctx.handle, input, output, C_NULL, label, req)
    end
end

"Returns once every rank has entered it."
barrier(ctx::Context) = (check(L.starling_barrier(ctx.handle)); nothing)
"Nonblocking `barrier`: `wait(req)` returns once every rank has entered it."
barrier_nonblocking(ctx::Context) = Request(req -> L.starling_barrier_nonblocking(ctx.handle, req), ctx, Any[], nothing)

"`allreduce!` among the ranks of this rank's machine only (collective over the context)."
local_allreduce!(ctx::Context, A::AbstractArray; kwargs...) = local_allreduce!(ctx, A, A; kwargs...)
function local_allreduce!(ctx::Context, out::AbstractArray, A::AbstractArray; op::Symbol=:sum, name=nothing)
    input, output = tensor_views(A, out)
    check(L.starling_local_allreduce(ctx.handle, input, output, reduce_op(op), cname(name)))
    return out
end

"Nonblocking `local_allreduce!`: `wait(req)` returns `out`."
function local_allreduce_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray; op::Symbol=:sum,
                                      name=nothing)
    input, output = tensor_views(A, out)
    label = cname(name)
    code = reduce_op(op)
    return Request(ctx, Any[input, output, label], out) do req
        L.starling_local_allreduce_nonblocking(ctx.handle, input, output, code, label, req)
    end
end

"""
    pair_gossip!(ctx, out, A, peer; self_weight=0.5, pair_weight=0.5, name=nothing) -> out

`out = self_weight * A + pair_weight * (peer's A)`; only this rank and `peer` call it.
"""
function pair_gossip!(ctx::Context, out::AbstractArray, A::AbstractArray, peer::Integer;
                      self_weight::Real=0.5, pair_weight::Real=0.5, name=nothing)
    input, output = tensor_views(A, out)
    check(L.starling_pair_gossip(ctx.handle, input, output, peer, self_weight, pair_weight, cname(name)))
    return out
end

"Nonblocking `pair_gossip!`: `wait(req)` returns `out`."
function pair_gossip_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray, peer::Integer;
                                  self_weight::Real=0.5, pair_weight::Real=0.5, name=nothing)
    input, output = tensor_views(A, out)
    label = cname(name)
    return Request(ctx, Any[input, output, label], out) do req
        L.starling_pair_gossip_nonblocking(ctx.handle, input, output, peer, self_weight, pair_weight, label, req)
    end
end
