package org.starling;

import org.starling.internal.gpu_path_code;

/** How a context moves CUDA tensors (Stats.gpuPath; Context.gpuPath() says why). */
public enum GpuPath {
  /** No collective on CUDA tensors yet. */
  NONE(gpu_path_code.GPU_PATH_NONE),
  /** Pinned host copies and the MPI algorithms. */
  STAGED(gpu_path_code.GPU_PATH_STAGED),
  /** NCCL between the ranks' GPUs. */
  NCCL(gpu_path_code.GPU_PATH_NCCL);

  private final int code;

  GpuPath(int code) {
    this.code = code;
  }

  static GpuPath of(long code) {
    for (GpuPath p : values()) {
      if (p.code == code) return p;
    }
    throw new IllegalStateException("unknown GPU path code " + code + " (a newer libstarling?)");
  }
}
