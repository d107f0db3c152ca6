package org.starling;

/**
 * Counters of a context since its creation (starling_stats_t); stagedBytes: bytes copied
 * between CUDA tensors and host staging buffers; gpuPath: how CUDA tensors move;
 * bytesBeforeCompression / bytesAfterCompression: the payloads of compressed operations
 * as they would have been uncompressed, and as sent; blockedNanos: time the application's
 * threads spent in blocking calls and request waits; shmBytesSent / shmBytesReceived: of
 * the bytes sent and received, those that went through shared memory (neighbor data
 * between ranks of one host).
 */
public record Stats(long operations, long fusedOperations, long fusionGroups, long messagesSent, long bytesSent,
    long scratchBytes, long stagedBytes, GpuPath gpuPath, long bytesBeforeCompression,
    long bytesAfterCompression, long messagesReceived, long bytesReceived, long blockedNanos, long shmBytesSent, long shmBytesReceived) {}
