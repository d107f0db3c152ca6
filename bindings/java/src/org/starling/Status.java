package org.starling;

import org.starling.internal.status_code;

/** Starling's status codes (starling_status_t). */
public enum Status {
  SUCCESS(status_code.SUCCESS),
  IN_PROGRESS(status_code.IN_PROGRESS),
  INVALID_ARGUMENT(status_code.ERR_INVALID_ARGUMENT),
  INVALID_HANDLE(status_code.ERR_INVALID_HANDLE),
  INVALID_USAGE(status_code.ERR_INVALID_USAGE),
  UNSUPPORTED(status_code.ERR_UNSUPPORTED),
  MISMATCH(status_code.ERR_MISMATCH),
  TIMEOUT(status_code.ERR_TIMEOUT),
  SHUTDOWN(status_code.ERR_SHUTDOWN),
  TRANSPORT(status_code.ERR_TRANSPORT),
  NOT_FOUND(status_code.ERR_NOT_FOUND),
  ALREADY_EXISTS(status_code.ERR_ALREADY_EXISTS),
  OUT_OF_MEMORY(status_code.ERR_OUT_OF_MEMORY),
  INTERNAL(status_code.ERR_INTERNAL),
  /** The context was aborted ({@link Context#abort()}); close it (closing is then local). */
  ABORTED(status_code.ERR_ABORTED),
  /** A rank of the context is gone (killed, or exited without closing); the message names it. */
  PEER_FAILED(status_code.ERR_PEER_FAILED),
  /** The CUDA runtime or NCCL failed; the message names the call. */
  DEVICE(status_code.ERR_DEVICE),
  /** A code this binding does not know (a newer library). */
  UNKNOWN(Integer.MIN_VALUE);

  private final int code;

  Status(int code) {
    this.code = code;
  }

  /** The C value. */
  public int code() {
    return code;
  }

  /** The Status for a C value; UNKNOWN if there is none. */
  public static Status of(int code) {
    for (Status s : values()) {
      if (s.code == code) return s;
    }
    return UNKNOWN;
  }
}
