"""
    StarlingError(status, message)

A Starling call failed. `status` is the C status code (`< 0`), `message` Starling's own
detail (`starling_last_error()`), which names what was wrong.
"""
struct StarlingError <: Exception
    status::Int
    message::String
end

const STATUS_NAMES = Dict{Int,String}(
    L.STARLING_ERR_INVALID_ARGUMENT => "INVALID_ARGUMENT",
    L.STARLING_ERR_INVALID_HANDLE => "INVALID_HANDLE",
    L.STARLING_ERR_INVALID_USAGE => "INVALID_USAGE",
    L.STARLING_ERR_UNSUPPORTED => "UNSUPPORTED",
    L.STARLING_ERR_MISMATCH => "MISMATCH",
    L.STARLING_ERR_TIMEOUT => "TIMEOUT",
    L.STARLING_ERR_SHUTDOWN => "SHUTDOWN",
    L.STARLING_ERR_TRANSPORT => "TRANSPORT",
    L.STARLING_ERR_NOT_FOUND => "NOT_FOUND",
    L.STARLING_ERR_ALREADY_EXISTS => "ALREADY_EXISTS",
    L.STARLING_ERR_OUT_OF_MEMORY => "OUT_OF_MEMORY",
    L.STARLING_ERR_INTERNAL => "INTERNAL",
    L.STARLING_ERR_ABORTED => "ABORTED",
    L.STARLING_ERR_PEER_FAILED => "PEER_FAILED",
    L.STARLING_ERR_DEVICE => "DEVICE",
)

function Base.showerror(io::IO, e::StarlingError)
    print(io, "StarlingError ", get(STATUS_NAMES, e.status, string(e.status)), ": ", e.message)
end

# The message of a failure that just happened on this thread (no task switch can occur
# between a ccall and this read: nothing in between yields).
function last_error_message(status::Integer)
    message = unsafe_string(L.starling_last_error())
    return isempty(message) ? unsafe_string(L.starling_status_string(status)) : message
end

"Returns `status`, or throws StarlingError if it is negative."
function check(status::Integer)
    status < 0 && throw(StarlingError(status, last_error_message(status)))
    return Int(status)
end

# `nothing` -> NULL for the C API's optional strings.
cname(name::Nothing) = C_NULL
cname(name::AbstractString) = String(name)
