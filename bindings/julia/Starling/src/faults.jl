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
