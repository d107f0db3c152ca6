package org.starling;

import java.util.Arrays;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A rank of the context is gone (killed, crashed, or exited without closing its context):
 * status {@link Status#PEER_FAILED}. The message names the rank(s); {@link #failedRanks()}
 * lists them. Close the context (closing is then local), or, on Open MPI 5 with ULFM
 * ({@link Context#faultTolerant()}), call {@link Context#repair()} on every survivor and
 * go on with them.
 */
public class PeerFailedException extends StarlingException {
  private static final long serialVersionUID = 1L;
  // "rank 1 (pid 42 on host vm) is gone", "rank 1 and rank 3 (pid ...) are gone".
  private static final Pattern GONE =
      Pattern.compile("((?:rank \\d+(?: \\([^()]*\\))?(?:, | and )?)+) (?:is|are) gone");
  private static final Pattern RANK = Pattern.compile("rank (\\d+)");

  /** The ranks the message names as gone. */
  private final int[] failedRanks;

  /** Called by the JNI layer with the failing status and starling_last_error(). */
  public PeerFailedException(int code, String message) {
    super(code, message);
    TreeSet<Integer> ranks = new TreeSet<>();
    Matcher gone = GONE.matcher(getMessage());
    while (gone.find()) {
      Matcher rank = RANK.matcher(gone.group(1));
      while (rank.find()) ranks.add(Integer.parseInt(rank.group(1)));
    }
    failedRanks = ranks.stream().mapToInt(Integer::intValue).toArray();
  }

  /** The ranks the message names as gone, ascending (numbering before any repair). */
  public int[] failedRanks() {
    return Arrays.copyOf(failedRanks, failedRanks.length);
  }
}
