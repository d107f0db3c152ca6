package org.starling;

/**
 * Traffic with one peer since the context's creation, or its last repair or grow
 * (starling_peer_stats_t): messages and bytes each way, and how many operation steps
 * exchanged messages with the peer ({@code waits}) and how long they waited for it (until
 * its messages arrived and it took ours), in all ({@code waitNanos}) and the last time
 * ({@code lastWaitNanos}). A slow or late peer shows long waits. {@code probeLatencyNanos} and
 * {@code probeBytesPerSecond}: the last {@link Context#probePeers} figures (0: never probed).
 */
public record PeerStats(long messagesSent, long bytesSent, long messagesReceived, long bytesReceived, long waits,
    long waitNanos, long lastWaitNanos, long probeLatencyNanos, long probeBytesPerSecond) {}
