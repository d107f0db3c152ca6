# One-sided windows: a rank writes into (or reads from) its neighbors' buffers and
# moves on; the target's progress thread applies the data while it computes.

"""
    Window(ctx, A, name; zero_init=false)

Creates window `name` over array `A` (collective: same name, element type and size on
every rank). This rank keeps one buffer per in-neighbor of the context's topology,
starting as copies of `A` (zeros with `zero_init`). The window keeps `A` alive and
reads and writes it until `close(win)`, which is collective (no finalizer frees it).
"""
mutable struct Window
    handle::L.starling_window_t
    context::Context
    name::String
    array::Any
    view::TensorView
    closed::Bool
end

function Window(ctx::Context, A::AbstractArray, name::AbstractString; zero_init::Bool=false)
    view = TensorView(A)
    out = Ref{L.starling_window_t}(C_NULL)
    check(L.starling_window_create(ctx.handle, view, String(name), Cint(zero_init), out))
    win = Window(out[], ctx, String(name), A, view, false)
    ctx.windows[win.name] = win
    return win
end

"""
    close(win)

Frees the window after every rank's earlier operations on it finished. Collective;
idempotent. A window whose context was closed is already gone.
"""
function Base.close(win::Window)
    win.closed && return nothing
    status = L.starling_window_free(win.handle)
    status == L.STARLING_ERR_INVALID_HANDLE || check(status)
    win.closed = true
    delete!(win.context.windows, win.name)
    return nothing
end

"The open window called `name` (StarlingError NOT_FOUND if none)."
function window(ctx::Context, name::AbstractString)
    out = Ref{L.starling_window_t}(C_NULL)
    check(L.starling_window_lookup(ctx.handle, String(name), out))
    return ctx.windows[String(name)]
end

"Names of the context's open windows, sorted."
function window_names(ctx::Context)
    needed = Ref{Csize_t}(0)
    buffer = Vector{UInt8}(undef, 256)
    while true
        status = L.starling_window_names(ctx.handle, buffer, length(buffer), needed)
        status == 0 && break
        # Too small: `needed` holds the text's length (names may change meanwhile: retry).
        (status == L.STARLING_ERR_INVALID_ARGUMENT && needed[] >= length(buffer)) || check(status)
        resize!(buffer, needed[] + 1)
    end
    text = String(buffer[1:needed[]])
    return String.(split(text, '\n'; keepempty=false))
end

"""
The C struct of a put/accumulate/get's arguments plus its arrays. `weights` (rank =>
weight) names the targets and scales what lands in their buffers; `ranks` names them
with weight 1; neither: every out-neighbor (put, accumulate) or in-neighbor (get).
"""
struct WindowArgs
    ref::Base.RefValue{L.starling_window_args_t}
    roots::Vector{Any}
end

Base.cconvert(::Type{Ptr{L.starling_window_args_t}}, a::WindowArgs) = a
Base.unsafe_convert(::Type{Ptr{L.starling_window_args_t}}, a::WindowArgs) =
    Base.unsafe_convert(Ptr{L.starling_window_args_t}, a.ref)

function WindowArgs(; ranks=nothing, weights=nothing, self_weight::Real=1.0, require_mutex::Bool=false)
    ranks === nothing || weights === nothing || throw(ArgumentError("give ranks or weights, not both"))
    if weights === nothing
        r, w = Cint[x for x in something(ranks, Int[])], C_NULL
    else
        r, w = ranks_weights(weights)
    end
    args = L.starling_window_args_t(; num_ranks=length(r), ranks=pointer(r), weights=w === C_NULL ? C_NULL : pointer(w),
                                     self_weight=self_weight, require_mutex=Int(require_mutex))
    return WindowArgs(Ref(args), Any[r, w])
end

"""
    win_put!(win, A=win.array; weights=nothing, ranks=nothing, self_weight=1.0, require_mutex=false) -> A

Writes `A` (the window's element type and size) into the destinations' buffers for
this rank, counting a version; afterwards `A` is multiplied by `self_weight`.
"""
function win_put!(win::Window, A::AbstractArray=win.array; kwargs...)
    check(L.starling_window_put(win.handle, TensorView(A), WindowArgs(; kwargs...)))
    return A
end

"Nonblocking `win_put!`: returns a `Request`."
function win_put_nonblocking!(win::Window, A::AbstractArray=win.array; kwargs...)
    view, args = TensorView(A), WindowArgs(; kwargs...)
    return Request(req -> L.starling_window_put_nonblocking(win.handle, view, args, req), win.context,
                   Any[view, args], A)
end

"As `win_put!`, but adds into the destination buffers (no version is counted)."
function win_accumulate!(win::Window, A::AbstractArray=win.array; kwargs...)
    check(L.starling_window_accumulate(win.handle, TensorView(A), WindowArgs(; kwargs...)))
    return A
end

"Nonblocking `win_accumulate!`: returns a `Request`."
function win_accumulate_nonblocking!(win::Window, A::AbstractArray=win.array; kwargs...)
    view, args = TensorView(A), WindowArgs(; kwargs...)
    return Request(req -> L.starling_window_accumulate_nonblocking(win.handle, view, args, req), win.context,
                   Any[view, args], A)
end

"Fetches each source's window array into this rank's buffer for it (scaled by its weight)."
function win_get!(win::Window; ranks=nothing, weights=nothing, require_mutex::Bool=false)
    check(L.starling_window_get(win.handle, WindowArgs(; ranks=ranks, weights=weights, require_mutex=require_mutex)))
    return win
end

"Nonblocking `win_get!`: returns a `Request`."
function win_get_nonblocking!(win::Window; ranks=nothing, weights=nothing, require_mutex::Bool=false)
    args = WindowArgs(; ranks=ranks, weights=weights, require_mutex=require_mutex)
    return Request(req -> L.starling_window_get_nonblocking(win.handle, args, req), win.context, Any[args], win)
end

"""
    win_update!(win; self_weight=nothing, neighbor_weights=nothing, reset=false, require_mutex=false) -> win.array

`A = self_weight * A + Σ_r w_r * buffer_r` in place on the window's array; versions
reset to 0. Without weights: the topology's if it is weighted, else the uniform
average. Local.
"""
function win_update!(win::Window; self_weight::Union{Nothing,Real}=nothing, neighbor_weights=nothing,
                     reset::Bool=false, require_mutex::Bool=false)
    (self_weight === nothing) == (neighbor_weights === nothing) ||
        throw(ArgumentError("self_weight and neighbor_weights go together"))
    r, w = ranks_weights(neighbor_weights)
    args = Ref(L.starling_window_update_args_t(; use_weights=Int(self_weight !== nothing),
        self_weight=something(self_weight, 0.0), num_ranks=length(r), ranks=pointer(r), weights=pointer(w),
        reset=Int(reset), require_mutex=Int(require_mutex)))
    GC.@preserve r w check(L.starling_window_update(win.handle, args))
    return win.array
end

"`A += Σ buffers`, then the buffers are zeroed (push-sum's collect step). Local."
function win_update_then_collect!(win::Window; require_mutex::Bool=false)
    check(L.starling_window_update_then_collect(win.handle, Cint(require_mutex)))
    return win.array
end

"Per in-neighbor: the puts and gets that arrived since the last update."
function win_versions(win::Window)
    capacity = max(win.context.size, 1)
    ranks = Vector{Cint}(undef, capacity)
    versions = Vector{Int64}(undef, capacity)
    count = Ref{Cint}(0)
    check(L.starling_window_versions(win.handle, ranks, versions, capacity, count))
    return Dict{Int,Int}(Int(ranks[k]) => Int(versions[k]) for k in 1:count[])
end

"""
    win_mutex_acquire(win; ranks=nothing, for_self=false)

for_self=false: on each listed rank (default: every out-neighbor), the mutex guarding its
buffer for this rank; for_self=true: this rank's own, for the listed ranks (default:
every in-neighbor). Blocks until granted; release with the same arguments.
"""
function win_mutex_acquire(win::Window; ranks=nothing, for_self::Bool=false)
    r = Cint[x for x in something(ranks, Int[])]
    check(L.starling_window_mutex_acquire(win.handle, r, length(r), Cint(for_self)))
    return nothing
end

"Releases the mutexes `win_mutex_acquire` took (same arguments)."
function win_mutex_release(win::Window; ranks=nothing, for_self::Bool=false)
    r = Cint[x for x in something(ranks, Int[])]
    check(L.starling_window_mutex_release(win.handle, r, length(r), Cint(for_self)))
    return nothing
end

"Push-sum: windows of `ctx` carry the associated scalar p."
function set_window_associated_p_enabled!(ctx::Context, enabled::Bool)
    check(L.starling_set_window_associated_p_enabled(ctx.handle, Cint(enabled)))
    return ctx
end

"This rank's push-sum weight `p` of the window (1.0 at creation)."
function associated_p(win::Window)
    p = Ref{Cdouble}(0)
    check(L.starling_window_associated_p(win.handle, p))
    return p[]
end

"Sets this rank's push-sum weight `p` of the window."
function set_associated_p!(win::Window, p::Real)
    check(L.starling_window_set_associated_p(win.handle, p))
    return win
end
