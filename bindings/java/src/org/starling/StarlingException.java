package org.starling;

import org.starling.internal.StarlingNative;

/**
 * A Starling call failed (a status below 0). The message is the library's own detail
 * (starling_last_error()); {@link #hint()} is the status's generic text.
 */
public class StarlingException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  /** The status code (negative) of the failing call. */
  private final int code;

  /** Called by the JNI layer with the failing status and starling_last_error(). */
  public StarlingException(int code, String message) {
    super(message == null || message.isEmpty() ? StarlingNative.status_string(code) : message);
    this.code = code;
  }

  /** The status, as an enum. */
  public Status status() {
    return Status.of(code);
  }

  /** The raw status code (negative). */
  public int code() {
    return code;
  }

  /** starling_status_string(): what the status means and what to do about it. */
  public String hint() {
    return StarlingNative.status_string(code);
  }

  @Override
  public String toString() {
    return getClass().getName() + " [" + status() + "]: " + getMessage();
  }
}
