# Julia arrays as DLPack tensors. Column-major memory of size (n1, ..., nk) is the
# row-major tensor of shape (nk, ..., n1): the shape is reversed, no data moves.

const DTYPES = Dict{DataType,Tuple{Cint,Int}}(
    Float16 => (L.kDLFloat, 16), Float32 => (L.kDLFloat, 32), Float64 => (L.kDLFloat, 64),
    Int8 => (L.kDLInt, 8), Int16 => (L.kDLInt, 16), Int32 => (L.kDLInt, 32), Int64 => (L.kDLInt, 64),
    UInt8 => (L.kDLUInt, 8),
)

"""
A DLTensor describing a Julia array, holding the array and the shape vector it points
to: as long as the view is reachable, every pointer in the DLTensor is valid.
"""
struct TensorView
    dl::Base.RefValue{L.DLTensor}
    shape::Vector{Int64}
    array::Any
end

function is_contiguous(A::AbstractArray)
    expected = 1
    for (n, s) in zip(size(A), strides(A))
        n == 1 || s == expected || return false
        expected *= n
    end
    return true
end

function TensorView(A::DenseArray{T}) where {T}
    haskey(DTYPES, T) || throw(ArgumentError(
        "Starling does not support element type $T (supported: Float16, Float32, Float64, Int8, Int16, Int32, Int64, UInt8)"))
    A isa Array || is_contiguous(A) || throw(ArgumentError("Starling needs contiguous arrays; copy the view first"))
    p = pointer(A)
    p isa Ptr || throw(ArgumentError("Starling needs arrays in CPU memory, not $(typeof(A))"))
    code, bits = DTYPES[T]
    shape = Int64[reverse(size(A))...]
    dl = Ref(L.DLTensor(Ptr{Cvoid}(p), L.DLDevice(L.kDLCPU, 0), length(shape), L.DLDataType(code, bits, 1),
                        pointer(shape), C_NULL, 0))
    return TensorView(dl, shape, A)
end

TensorView(A::AbstractArray) = throw(ArgumentError(
    "Starling needs a DenseArray (Array, or a contiguous array type), not $(typeof(A))"))

# ccall passes a TensorView as the pointer to its DLTensor, keeping the view rooted.
Base.cconvert(::Type{Ptr{L.DLTensor}}, t::TensorView) = t
Base.unsafe_convert(::Type{Ptr{L.DLTensor}}, t::TensorView) = Base.unsafe_convert(Ptr{L.DLTensor}, t.dl)

# The input and output views of an operation; one view when they are the same array
# (in place).
function tensor_views(A::AbstractArray, out::AbstractArray)
    input = TensorView(A)
    return input, out === A ? input : TensorView(out)
end

# (ranks, weights) arrays from a Dict or Pairs (rank => weight); Dict keys are sorted.
function ranks_weights(weights::AbstractDict)
    ranks = sort!(collect(keys(weights)))
    return Cint[r for r in ranks], Cdouble[weights[r] for r in ranks]
end
ranks_weights(weights::AbstractVector{<:Pair}) = (Cint[first(p) for p in weights], Cdouble[last(p) for p in weights])
ranks_weights(weights::Nothing) = (Cint[], Cdouble[])
