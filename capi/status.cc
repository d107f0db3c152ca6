// Status codes, error text and version: the parts of the ABI that need no context.
#include <new>
#include <string>

#include "capi/private/api.h"
#include "impl/common/config.h"
#include "impl/common/dtype.h"

namespace starling::capi {
namespace {
thread_local std::string t_last_error;

static_assert(static_cast<int>(Code::kInvalidArgument) == STARLING_ERR_INVALID_ARGUMENT &&
                  static_cast<int>(Code::kInvalidHandle) == STARLING_ERR_INVALID_HANDLE &&
                  static_cast<int>(Code::kInvalidUsage) == STARLING_ERR_INVALID_USAGE &&
                  static_cast<int>(Code::kUnsupported) == STARLING_ERR_UNSUPPORTED &&
                  static_cast<int>(Code::kMismatch) == STARLING_ERR_MISMATCH &&
                  static_cast<int>(Code::kTimeout) == STARLING_ERR_TIMEOUT &&
                  static_cast<int>(Code::kShutdown) == STARLING_ERR_SHUTDOWN &&
                  static_cast<int>(Code::kTransport) == STARLING_ERR_TRANSPORT &&
                  static_cast<int>(Code::kNotFound) == STARLING_ERR_NOT_FOUND &&
                  static_cast<int>(Code::kAlreadyExists) == STARLING_ERR_ALREADY_EXISTS &&
                  static_cast<int>(Code::kOutOfMemory) == STARLING_ERR_OUT_OF_MEMORY &&
                  static_cast<int>(Code::kInternal) == STARLING_ERR_INTERNAL &&
                  static_cast<int>(Code::kAborted) == STARLING_ERR_ABORTED &&
                  static_cast<int>(Code::kPeerFailed) == STARLING_ERR_PEER_FAILED &&
                  static_cast<int>(Code::kDevice) == STARLING_ERR_DEVICE,
              "impl/common/error.h codes must match starling.h");
}  // namespace

starling_status_t SetLastError(Code code, const std::string& message) {
  try {
    t_last_error = message;
  } catch (...) {
    // Out of memory while storing the message: keep the code, lose the text.
  }
  return static_cast<starling_status_t>(code);
}

starling_status_t StatusFromCurrentException() {
  try {
    throw;
  } catch (const Error& e) {
    return SetLastError(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return SetLastError(Code::kOutOfMemory, "out of memory");
  } catch (const std::exception& e) {
    return SetLastError(Code::kInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    return SetLastError(Code::kInternal, "internal error: unknown exception");
  }
}

}  // namespace starling::capi

extern "C" {

STARLING_API int starling_get_version(void) { return STARLING_VERSION_CODE; }

STARLING_API const char* starling_status_string(starling_status_t status) {
  switch (status) {
    case STARLING_SUCCESS: return "success";
    case STARLING_IN_PROGRESS: return "in progress: the request has not finished yet; test or wait again";
    case STARLING_ERR_INVALID_ARGUMENT: return "invalid argument: see starling_last_error() for which one";
    case STARLING_ERR_INVALID_HANDLE: return "invalid handle: NULL, already freed, or destroyed";
    case STARLING_ERR_INVALID_USAGE: return "invalid usage: the call is not allowed in this state";
    case STARLING_ERR_UNSUPPORTED: return "unsupported: dtype, device or feature not supported by this build";
    case STARLING_ERR_MISMATCH: return "mismatch: ranks disagree on a collective call (op, dtype, shape or root); every rank must make the same calls in the same order";
    case STARLING_ERR_TIMEOUT: return "timeout: peers did not answer within STARLING_TIMEOUT_SECONDS";
    case STARLING_ERR_SHUTDOWN: return "shutdown: the context was destroyed before the operation ran";
    case STARLING_ERR_TRANSPORT: return "transport failure: MPI reported an error; the context is unusable, destroy it";
    case STARLING_ERR_NOT_FOUND: return "not found: no object with that name";
    case STARLING_ERR_ALREADY_EXISTS: return "already exists: the name is taken";
    case STARLING_ERR_OUT_OF_MEMORY: return "out of memory";
    case STARLING_ERR_INTERNAL: return "internal error: a bug in Starling, please report it with starling_last_error()";
    case STARLING_ERR_ABORTED: return "aborted: starling_context_abort was called on this context; destroy it (destroy is then local and never waits for peers)";
    case STARLING_ERR_PEER_FAILED: return "peer failed: a rank of this context is gone (killed, crashed or exited without destroying its context); starling_last_error() names it; destroy the context (destroy is then local)";
    case STARLING_ERR_DEVICE: return "device error: the CUDA runtime or NCCL failed; starling_last_error() names the call; the tensors involved may be partly written";
    default: return "unknown status code";
  }
}

STARLING_API const char* starling_last_error(void) { return starling::capi::t_last_error.c_str(); }

}  // extern "C"
