# Compressed communication (README "Compressed communication"): allreduce of compressed
# tensors and CHOCO gossip for neighbor averaging.

const COMPRESSORS = Dict(:float16 => L.STARLING_COMPRESS_FLOAT16, :bfloat16 => L.STARLING_COMPRESS_BFLOAT16,
                         :topk => L.STARLING_COMPRESS_TOPK, :randomk => L.STARLING_COMPRESS_RANDOMK,
                         :sign => L.STARLING_COMPRESS_SIGN)

"""
    Compression(kind; k=0, ratio=0.0, seed=0, error_feedback=false, gamma=1.0)

A compressor: `kind` is `:float16`, `:bfloat16`, `:topk`, `:randomk` or `:sign`; top-k and
random-k keep `k` elements, or `ceil(ratio * n)` when `k == 0`. `error_feedback`: allreduce
keeps what was dropped per name. `gamma`: the CHOCO step size for neighbor averaging.
"""
function Compression(kind::Symbol; k::Integer=0, ratio::Real=0.0, seed::Integer=0, error_feedback::Bool=false,
                     gamma::Real=1.0)
    haskey(COMPRESSORS, kind) || throw(ArgumentError(
        "compressor must be :float16, :bfloat16, :topk, :randomk or :sign, not :$kind"))
    return L.starling_compression_t(; compressor=COMPRESSORS[kind], k=Int64(k), ratio=Float64(ratio),
                                    seed=UInt64(seed), error_feedback=Cint(error_feedback), gamma=Float64(gamma))
end

"""
    allreduce_compressed!(ctx, out, A, compression; op=:sum, name=nothing) -> out

`op` (`:sum` or `:average`) over every rank's compressed `A`; every rank gets the same
bits. `name` keys error feedback and random-k's step.
"""
function allreduce_compressed!(ctx::Context, out::AbstractArray, A::AbstractArray, compression::L.starling_compression_t;
                               op::Symbol=:sum, name=nothing)
    input, output = tensor_views(A, out)
    check(L.starling_allreduce_compressed(ctx.handle, input, output, reduce_op(op), cname(name), Ref(compression)))
    return out
end

"Nonblocking `allreduce_compressed!`: `wait(req)` returns `out`."
function allreduce_compressed_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray,
                                           compression::L.starling_compression_t; op::Symbol=:sum, name=nothing)
    input, output = tensor_views(A, out)
    label = cname(name)
    code = reduce_op(op)
    options = Ref(compression)
    return Request(ctx, Any[input, output, label, options], out) do req
        L.starling_allreduce_compressed_nonblocking(ctx.handle, input, output, code, label, options, req)
    end
end

"""
    neighbor_allreduce_compressed!(ctx, out, A, compression; name, kwargs...) -> out

CHOCO gossip over the static topology (keyword arguments as `neighbor_allreduce!`;
`name` is required: it keys the public copies).
"""
function neighbor_allreduce_compressed!(ctx::Context, out::AbstractArray, A::AbstractArray,
                                        compression::L.starling_compression_t; kwargs...)
    input, output = tensor_views(A, out)
    check(L.starling_neighbor_allreduce_compressed(ctx.handle, input, output, NeighborArgs(; kwargs...),
                                                   Ref(compression)))
    return out
end

"Nonblocking `neighbor_allreduce_compressed!`: `wait(req)` returns `out`."
function neighbor_allreduce_compressed_nonblocking!(ctx::Context, out::AbstractArray, A::AbstractArray,
                                                    compression::L.starling_compression_t; kwargs...)
    input, output = tensor_views(A, out)
    args = NeighborArgs(; kwargs...)
    options = Ref(compression)
    return Request(ctx, Any[input, output, args, options], out) do req
        L.starling_neighbor_allreduce_compressed_nonblocking(ctx.handle, input, output, args, options, req)
    end
end

"Drops the compression state kept under `name` (`nothing`: every name). Call it on every rank alike."
compression_reset!(ctx::Context, name=nothing) = (check(L.starling_compression_reset(ctx.handle, cname(name))); nothing)
