"""
    Context(; nodes_per_machine=0, host_comm=nothing)
    Context(f; kwargs...)   # do-block: closes the context afterwards

A group of ranks with one progress engine. Collective. `ctx.rank` and `ctx.size` are
this rank and the number of ranks. `nodes_per_machine` groups consecutive ranks into
simulated machines; `host_comm` (a Fortran communicator handle, e.g.
`MPI.Comm_c2f(comm)` from MPI.jl) makes Starling use the host's MPI instead of its own.

The first context initializes MPI and closing the last one finalizes it, after which
no context can be created in the process: keep one open for the program's life. Close
it with `close(ctx)` on every rank (collective); there is no finalizer.
"""
mutable struct Context
    handle::L.starling_context_t
    rank::Int
    size::Int
    windows::Dict{String,Any}
    closed::Bool
end

function Context(; nodes_per_machine::Integer=0, host_comm::Union{Nothing,Integer}=nothing)
    options = Ref(L.starling_context_options_t(; use_host_comm=host_comm === nothing ? 0 : 1,
                                                 host_comm=something(host_comm, 0),
                                                 nodes_per_machine=nodes_per_machine))
    out = Ref{L.starling_context_t}(C_NULL)
    check(L.starling_context_create(options, out))
    ctx = Context(out[], 0, 1, Dict{String,Any}(), false)
    ctx.rank = query(L.starling_rank, ctx)
    ctx.size = query(L.starling_size, ctx)
    return ctx
end

"""
    split(ctx, color; key=0, nodes_per_machine=0) -> Union{Context,Nothing}

A new context over the ranks passing the same `color` (MPI_Comm_split), ranked by
`key`; `nothing` for `color === nothing` (this rank joins none). Collective over `ctx`.
"""
function split(ctx::Context, color::Union{Nothing,Integer}; key::Integer=0, nodes_per_machine::Integer=0)
    options = Ref(L.starling_split_options_t(; nodes_per_machine=nodes_per_machine))
    out = Ref{L.starling_context_t}(C_NULL)
    check(L.starling_context_split(ctx.handle, something(color, L.STARLING_SPLIT_UNDEFINED), key, options, out))
    out[] == C_NULL && return nothing
    child = Context(out[], 0, 1, Dict{String,Any}(), false)
    child.rank = query(L.starling_rank, child)
    child.size = query(L.starling_size, child)
    return child
end

function Context(f::Function; kwargs...)
    ctx = Context(; kwargs...)
    try
        return f(ctx)
    finally
        close(ctx)
    end
end

function query(f::Function, ctx::Context)
    out = Ref{Cint}(0)
    check(f(ctx.handle, out))
    return Int(out[])
end

"Rank within this rank's machine."
local_rank(ctx::Context) = query(L.starling_local_rank, ctx)
"Number of ranks on this rank's machine."
local_size(ctx::Context) = query(L.starling_local_size, ctx)
"Index of this rank's machine."
machine_rank(ctx::Context) = query(L.starling_machine_rank, ctx)
"Number of machines (hosts, or groups of `nodes_per_machine` ranks)."
machine_size(ctx::Context) = query(L.starling_machine_size, ctx)
"Same number of ranks on every machine, numbered contiguously per machine."
is_homogeneous(ctx::Context) = query(L.starling_is_homogeneous, ctx) != 0

"""
Counters since the context's creation (operations, fusion, messages and bytes sent and
received, scratch, `blocked_ns`: time this process's threads spent in blocking calls and
request waits).
"""
function stats(ctx::Context)
    s = Ref(L.starling_stats_t())
    check(L.starling_get_stats(ctx.handle, s))
    v = s[]
    return (operations=Int(v.operations), fused_operations=Int(v.fused_operations),
            fusion_groups=Int(v.fusion_groups), messages_sent=Int(v.messages_sent),
            bytes_sent=Int(v.bytes_sent), scratch_bytes=Int(v.scratch_bytes),
            staged_bytes=Int(v.staged_bytes), gpu_path=Int(v.gpu_path),
            bytes_before_compression=Int(v.bytes_before_compression),
            bytes_after_compression=Int(v.bytes_after_compression),
            messages_received=Int(v.messages_received), bytes_received=Int(v.bytes_received),
            blocked_ns=Int(v.blocked_ns), shm_bytes_sent=Int(v.shm_bytes_sent),
            shm_bytes_received=Int(v.shm_bytes_received))
end

"""
Traffic with rank `peer` (0-based) since the context's creation or its last repair or
grow: messages and bytes each way, and `waits`, `wait_ns`, `last_wait_ns`: how many
operation steps exchanged messages with `peer`, and how long they waited for it (until its
messages arrived and it took ours; in all, and the last).
"""
function peer_stats(ctx::Context, peer::Integer)
    s = Ref(L.starling_peer_stats_t())
    check(L.starling_get_peer_stats(ctx.handle, Cint(peer), s))
    v = s[]
    return (messages_sent=Int(v.messages_sent), bytes_sent=Int(v.bytes_sent),
            messages_received=Int(v.messages_received), bytes_received=Int(v.bytes_received),
            waits=Int(v.waits), wait_ns=Int(v.wait_ns), last_wait_ns=Int(v.last_wait_ns),
            probe_latency_ns=Int(v.probe_latency_ns), probe_bytes_per_second=Int(v.probe_bytes_per_second))
end

"""
Measures this rank's latency to every other rank and its throughput to it by ping-pong,
all ranks at once (collective: every rank calls it alike). Returns
`(latency_seconds, bytes_per_second)`, vectors indexed by rank + 1 (0 for this rank):
half the best of `repetitions` header-only round trips, and `bulk_bytes` over the best
bulk round trip less the header-only one. The figures also stay in `peer_stats`.
"""
function probe_peers(ctx::Context; repetitions::Integer=5, bulk_bytes::Integer=1 << 20)
    bulk_bytes >= 0 || throw(ArgumentError("bulk_bytes must be >= 0, got $bulk_bytes"))
    n = query(L.starling_size, ctx)
    latency = zeros(Float64, n)
    throughput = zeros(Float64, n)
    args = Ref(L.starling_probe_args_t(; repetitions=Cint(repetitions), bulk_bytes=UInt64(bulk_bytes)))
    check(L.starling_probe_peers(ctx.handle, args, latency, throughput, Cint(n)))
    return latency, throughput
end

"""
    link_latencies(ctx; repetitions=5)

Every rank's probed latency to every rank (seconds) as a `size x size` matrix, the same
on every rank: entry `[i, j]` is rank `i - 1`'s time to rank `j - 1` (0 on the diagonal),
for `fast_pairs_schedule`. Collective: `probe_peers` with 1-byte bulk pings, then an
allgather of the rows.
"""
function link_latencies(ctx::Context; repetitions::Integer=5)
    latency, _ = probe_peers(ctx; repetitions=repetitions, bulk_bytes=1)
    n = length(latency)
    flat = allgather(ctx, latency; name="starling.link_latencies")  # rank 0's row first
    return permutedims(reshape(flat, n, n))
end

"""
How this context moves CUDA memory, and why: `"none (no CUDA tensor used yet)"` or
`"staged on cuda:0: ..."`. (This binding passes host arrays; CUDA memory reaches
Starling from Julia only through raw DLPack tensors.)
"""
function gpu_path(ctx::Context)
    out = Ref{Ptr{Cchar}}(C_NULL)
    check(L.starling_gpu_path(ctx.handle, out))
    return unsafe_string(out[])
end

"Sets the CUDA stream (a `cudaStream_t` as a pointer) this task's thread orders CUDA operations against."
set_cuda_stream!(stream::Ptr{Cvoid}) = (check(L.starling_set_cuda_stream(stream)); nothing)

"This thread's CUDA stream (`C_NULL`: the legacy default stream)."
function cuda_stream()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(L.starling_get_cuda_stream(out))
    return out[]
end

"True if this context writes a timeline (`STARLING_TIMELINE=<prefix>`)."
timeline_enabled(ctx::Context) = query(L.starling_timeline_enabled, ctx) != 0

"""
    timeline_start_activity(ctx, name, activity)
    timeline_end_activity(ctx, name)
    timeline_activity(f, ctx, name, activity)   # do-block form

Marks a user activity (e.g. "FORWARD") on the timeline lane `name`. Throws
`StarlingError` (INVALID_USAGE) when the timeline is off.
"""
timeline_start_activity(ctx::Context, name::AbstractString, activity::AbstractString) =
    check(L.starling_timeline_start_activity(ctx.handle, name, activity))
timeline_end_activity(ctx::Context, name::AbstractString) = check(L.starling_timeline_end_activity(ctx.handle, name))

function timeline_activity(f::Function, ctx::Context, name::AbstractString, activity::AbstractString)
    timeline_start_activity(ctx, name, activity)
    try
        return f()
    finally
        timeline_end_activity(ctx, name)
    end
end

"""
    abort!(ctx)

Aborts the context, like NCCL's `ncclCommAbort` (`starling_context_abort`): callable from
any thread at any time, also while other tasks or threads are blocked in calls on this
context. Every operation in flight or queued fails within milliseconds with a
`StarlingError` of status ABORTED, and so does every later call. Local: peers are not
told. Then `close(ctx)`, which is local too. Idempotent.
"""
function abort!(ctx::Context)
    check(L.starling_context_abort(ctx.handle))
    return nothing
end

"""
    abandon!(ctx, reason = "abandoned its context")

Leaves the job now, without the other ranks (`starling_context_abandon`), and closes the
context: they are told, and their pending and later operations that wait for this rank
throw `StarlingError` (PEER_FAILED) naming it and `reason` (what follows "rank N ", e.g.
"is exiting: out of memory"). Local: no collective, MPI is not finalized (the process
should exit). A process that exits with the context still open does this by itself.
"""
abandon!(ctx::Context, reason::AbstractString = "abandoned its context") =
    teardown!(() -> L.starling_context_abandon(ctx.handle, reason), ctx)

# close and abandon!: mark the context closed first (idempotent), run the C teardown,
# and release what the context roots even when the teardown throws.
function teardown!(destroy::Function, ctx::Context)
    ctx.closed && return nothing
    ctx.closed = true
    try
        check(destroy())
    finally
        release_requests(ctx)
        empty!(ctx.windows)
    end
    return nothing
end

"""
    close(ctx)

Destroys the context (collective): operations already submitted finish first, later
calls throw `StarlingError` (INVALID_HANDLE). Idempotent. After `abort!(ctx)` or a
PEER_FAILED error it is local: it never waits for peers.
"""
Base.close(ctx::Context) = teardown!(() -> L.starling_context_destroy(ctx.handle), ctx)

"The library's version, `major * 10000 + minor * 100 + patch`."
version() = Int(L.starling_get_version())

"The STARLING_* environment variables in effect, with their defaults and meanings."
config() = unsafe_string(L.starling_config_string())

"Whether Starling's operations accept arrays of element type `T`."
function dtype_supported(::Type{T}) where {T}
    haskey(DTYPES, T) || return false
    code, bits = DTYPES[T]
    out = Ref{Cint}(0)
    check(L.starling_dtype_supported(L.DLDataType(code, bits, 1), out))
    return out[] != 0
end
