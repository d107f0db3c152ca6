package org.starling;

import org.starling.internal.status_code;

/** Starling's status codes (starling_status_t). */
public enum Status {
  /** The call did what it says. */
  SUCCESS(status_code.SUCCESS),
  /** A request has not finished yet (test only). */
  IN_PROGRESS(status_code.IN_PROGRESS),
  /** A null pointer, bad tensor, shape, rank or weight. */
  INVALID_ARGUMENT(status_code.ERR_INVALID_ARGUMENT),
  /** A null, freed or destroyed handle. */
  INVALID_HANDLE(status_code.ERR_INVALID_HANDLE),
  /** Right arguments at the wrong moment (waited twice, windows alive...). */
  INVALID_USAGE(status_code.ERR_INVALID_USAGE),
  /** A dtype, device or feature that is not supported. */
  UNSUPPORTED(status_code.ERR_UNSUPPORTED),
  /** Ranks disagree on a collective call. */
  MISMATCH(status_code.ERR_MISMATCH),
  /** STARLING_TIMEOUT_SECONDS passed waiting for peers. */
  TIMEOUT(status_code.ERR_TIMEOUT),
  /** The context was destroyed before the operation ran. */
  SHUTDOWN(status_code.ERR_SHUTDOWN),
  /** MPI failed; the context is unusable. */
  TRANSPORT(status_code.ERR_TRANSPORT),
  /** No such name (windows). */
  NOT_FOUND(status_code.ERR_NOT_FOUND),
  /** The name is already taken (windows). */
  ALREADY_EXISTS(status_code.ERR_ALREADY_EXISTS),
  /** An allocation failed. */
  OUT_OF_MEMORY(status_code.ERR_OUT_OF_MEMORY),
  /** A bug in Starling: please report it. */
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
