# Requests of nonblocking operations. A request roots every array and struct its
# operation points into until the operation completes. Until then it is also held by
# IN_FLIGHT, so dropping it can never let the GC free memory the engine still writes;
# closing its Context (which finishes every operation) releases that hold. The
# finalizer only frees a finished request's C handle: it never waits and never makes a
# collective call.

const IN_FLIGHT = Set{Any}()
const IN_FLIGHT_LOCK = ReentrantLock()

"""
    Request

The handle of a nonblocking operation. `wait(req)` blocks until it finishes and returns
its result (usually the output array), `test(req)` polls; both throw the operation's
[`StarlingError`](@ref), as often as they are called.
"""
mutable struct Request
    handle::L.starling_request_t
    context::Any
    roots::Vector{Any}
    result::Any
    status::Int  # STARLING_IN_PROGRESS while running, else the final status
    message::String
end

# Submits an operation: `submit(out::Ref{starling_request_t})` makes the C call.
function Request(submit::Function, context, roots::Vector{Any}, result)
    out = Ref{L.starling_request_t}(C_NULL)
    check(submit(out))
    request = Request(out[], context, roots, result, L.STARLING_IN_PROGRESS, "")
    lock(() -> push!(IN_FLIGHT, request), IN_FLIGHT_LOCK)
    finalizer(free_finished, request)
    return request
end

function free_finished(request::Request)
    if request.handle != C_NULL
        L.starling_request_free(request.handle)  # unreachable => finished; status ignored
        request.handle = C_NULL
    end
    return nothing
end

function finish!(request::Request, status::Integer)
    request.message = status < 0 ? last_error_message(status) : ""
    request.status = status
    free_finished(request)
    empty!(request.roots)
    lock(() -> delete!(IN_FLIGHT, request), IN_FLIGHT_LOCK)
    return nothing
end

function outcome(request::Request)
    request.status < 0 && throw(StarlingError(request.status, request.message))
    return request.result
end

"""
    test(req) -> Bool

True once the operation finished (throws its StarlingError if it failed); never blocks.
"""
function test(request::Request)
    if request.status == L.STARLING_IN_PROGRESS
        status = L.starling_request_test(request.handle)
        status == L.STARLING_IN_PROGRESS && return false
        finish!(request, status)
    end
    outcome(request)
    return true
end

"""
    wait(req)

Blocks (this thread, in C) until the operation finishes; returns its result.
"""
function Base.wait(request::Request)
    if request.status == L.STARLING_IN_PROGRESS
        finish!(request, L.starling_request_wait(request.handle))
    end
    return outcome(request)
end

Base.wait(requests::AbstractVector{Request}) = map(wait, requests)

# After a context is destroyed all its operations have finished.
function release_requests(context)
    lock(IN_FLIGHT_LOCK) do
        filter!(r -> r.context !== context, IN_FLIGHT)
    end
    return nothing
end
