# Surviving failures (Open MPI 5 with ULFM; README "Surviving failures").

"True if this context survives the death of a rank (ULFM built in and enabled for this job)."
fault_tolerant(ctx::Context) = query(L.starling_fault_tolerant, ctx) != 0

"""
    repair!(ctx; topology=nothing, weighted=false)

After a call failed with `PEER_FAILED` (a `StarlingError`), every surviving rank calls
`repair!` (collective over the survivors; nothing else may run on the context meanwhile).
The dead ranks are dropped, the survivors renumbered in their old order, the topology
rebuilt (the same generator over the new size, or `topology`, which must have the new
size), and windows reshaped. Updates `ctx.rank` and `ctx.size` and returns
`(old_rank, old_size, new_rank, new_size, failed, old_to_new)` with 0-based ranks:
`failed` the dropped ranks, `old_to_new[r + 1]` the new rank of old rank `r` (-1 if
dropped). Without ULFM it throws `StarlingError` (UNSUPPORTED) saying what is needed.
"""
function repair!(ctx::Context; topology::Union{Nothing,Topology}=nothing, weighted::Bool=false)
    options = Ref(L.starling_repair_options_t(; topology=topology === nothing ? C_NULL : handle(topology),
                                                is_weighted=Cint(weighted)))
    old_to_new = Vector{Cint}(undef, ctx.size)
    failed = Vector{Cint}(undef, ctx.size)
    result = Ref(L.starling_repair_result_t())
    GC.@preserve topology old_to_new failed begin
        result[] = L.starling_repair_result_t(; old_to_new=pointer(old_to_new), old_to_new_capacity=Cint(length(old_to_new)),
                                                failed=pointer(failed), failed_capacity=Cint(length(failed)))
        check(L.starling_context_repair(ctx.handle, options, result))
    end
    r = result[]
    ctx.rank = Int(r.new_rank)
    ctx.size = Int(r.new_size)
    return (old_rank=Int(r.old_rank), old_size=Int(r.old_size), new_rank=Int(r.new_rank),
            new_size=Int(r.new_size), failed=Int.(failed[1:Int(r.num_failed)]),
            old_to_new=Int.(old_to_new[1:Int(r.old_size)]))
end

"True if this process entered `ctx` through a `grow!` of a running job (it was started by it)."
joined(ctx::Context) = query(L.starling_joined, ctx) != 0

"""
    grow!(ctx; count=1, ranks=nothing, command=nothing, args=String[], topology=nothing, weighted=false)

Grows the context by `count` new processes (collective over the current ranks; needs
ULFM, else `StarlingError` UNSUPPORTED). `ranks` (0-based): each newcomer's rank in the
grown context (default: after the current ranks; e.g. `[1]` puts a replacement at a
repaired-away rank 1's place); the current ranks keep their order. `command`/`args`:
the newcomers' program (default: this process's executable and arguments, so the same
script joins: its `Context()` enters the grown context and `joined(ctx)` is true).
`topology`: over the grown size (default: the current generator over it). No window may
exist. Updates `ctx.rank`/`ctx.size`; returns `(old_rank, old_size, new_rank, new_size,
old_to_new, joined)` with 0-based ranks.
"""
function grow!(ctx::Context; count::Integer=1, ranks::Union{Nothing,AbstractVector{<:Integer}}=nothing,
               command::Union{Nothing,AbstractString}=nothing, args::AbstractVector{<:AbstractString}=String[],
               topology::Union{Nothing,Topology}=nothing, weighted::Bool=false)
    places = ranks === nothing ? Cint[] : Cint.(ranks)
    ranks !== nothing && length(places) != count && throw(ArgumentError("ranks must have count ($count) entries"))
    argv = Ptr{Cchar}[Ptr{Cchar}(pointer(a)) for a in args]
    push!(argv, Ptr{Cchar}(C_NULL))
    old_to_new = Vector{Cint}(undef, ctx.size)
    newcomers = Vector{Cint}(undef, max(Int(count), 0))
    result = Ref(L.starling_grow_result_t())
    GC.@preserve places command args argv topology old_to_new newcomers begin
        options = Ref(L.starling_grow_options_t(; count=Cint(count),
                                                  ranks=ranks === nothing ? C_NULL : pointer(places),
                                                  command=command === nothing ? C_NULL : Ptr{Cchar}(pointer(command)),
                                                  argv=command === nothing ? C_NULL : pointer(argv),
                                                  topology=topology === nothing ? C_NULL : handle(topology),
                                                  is_weighted=Cint(weighted)))
        result[] = L.starling_grow_result_t(; old_to_new=pointer(old_to_new), old_to_new_capacity=Cint(length(old_to_new)),
                                              joined=pointer(newcomers), joined_capacity=Cint(length(newcomers)))
        check(L.starling_context_grow(ctx.handle, options, result))
    end
    r = result[]
    ctx.rank = Int(r.new_rank)
    ctx.size = Int(r.new_size)
    return (old_rank=Int(r.old_rank), old_size=Int(r.old_size), new_rank=Int(r.new_rank), new_size=Int(r.new_size),
            old_to_new=Int.(old_to_new[1:Int(r.old_size)]), joined=Int.(newcomers))
end

"""
    shrink!(ctx; count=1, ranks=nothing, topology=nothing, weighted=false)

`count` ranks leave the context (collective over the current ranks; needs ULFM, else
`StarlingError` UNSUPPORTED): those of `ranks` (0-based; default: the last `count`). The
others are renumbered in their order and get `topology` (over the new size; default:
the current generator, or the subgraph they induce). No window may exist. On a rank
that stays, updates `ctx.rank`/`ctx.size`; on a rank that leaves, `new_rank` is -1, the
context takes part in nothing more (calls throw INVALID_USAGE; `close` is local) and
the process may exit. Returns `(old_rank, old_size, new_rank, new_size, old_to_new,
left)` with 0-based ranks.
"""
function shrink!(ctx::Context; count::Integer=1, ranks::Union{Nothing,AbstractVector{<:Integer}}=nothing,
                 topology::Union{Nothing,Topology}=nothing, weighted::Bool=false)
    leaving = ranks === nothing ? Cint[] : Cint.(ranks)
    ranks !== nothing && length(leaving) != count && throw(ArgumentError("ranks must have count ($count) entries"))
    old_to_new = Vector{Cint}(undef, ctx.size)
    left = Vector{Cint}(undef, clamp(Int(count), 0, ctx.size))
    result = Ref(L.starling_shrink_result_t())
    GC.@preserve leaving topology old_to_new left begin
        options = Ref(L.starling_shrink_options_t(; count=Cint(count),
                                                    ranks=ranks === nothing ? C_NULL : pointer(leaving),
                                                    topology=topology === nothing ? C_NULL : handle(topology),
                                                    is_weighted=Cint(weighted)))
        result[] = L.starling_shrink_result_t(; old_to_new=pointer(old_to_new), old_to_new_capacity=Cint(length(old_to_new)),
                                               left=pointer(left), left_capacity=Cint(length(left)))
        check(L.starling_context_shrink(ctx.handle, options, result))
    end
    r = result[]
    if r.new_rank >= 0
        ctx.rank = Int(r.new_rank)
        ctx.size = Int(r.new_size)
    end
    return (old_rank=Int(r.old_rank), old_size=Int(r.old_size), new_rank=Int(r.new_rank), new_size=Int(r.new_size),
            old_to_new=Int.(old_to_new[1:Int(r.old_size)]), left=Int.(left[1:Int(r.old_size - r.new_size)]))
end

"""
    resize!(ctx, new_size)

Resizes the context to `new_size` ranks (`starling_context_resize`): `shrink!` of the last
ranks when smaller, `grow!` at the end (this process's program) when larger, nothing when
equal. Collective; needs ULFM. Returns true on a rank that left (its context takes part
in nothing more), else false; updates `ctx.rank`/`ctx.size` where it stays.
"""
function Base.resize!(ctx::Context, new_size::Integer)
    left = Ref{Cint}(0)
    check(L.starling_context_resize(ctx.handle, Cint(new_size), left))
    if left[] == 0
        ctx.rank = query(L.starling_rank, ctx)
        ctx.size = query(L.starling_size, ctx)
    end
    return left[] != 0
end
