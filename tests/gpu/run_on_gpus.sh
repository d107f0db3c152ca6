#!/usr/bin/env bash
# Runs the GPU tests and the GPU benchmark on a machine with NVIDIA GPUs, against the
# real plugin (libstarling_cuda.so: CUDA runtime + NCCL), not the emulator:
#   - the staged path with 2 ranks sharing GPU 0;
#   - the NCCL path with one rank per GPU (needs 2+ GPUs; skipped with one);
#   - examples/python/gpu_arrays.py with CuPy and JAX GPU arrays, where installed;
#   - starling_bench --device cuda on both paths.
# Usage: bash tests/gpu/run_on_gpus.sh   (after packaging/build.sh; needs nvidia-smi)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -ge 1 ] || { echo "no GPU found by nvidia-smi"; exit 1; }
[ -f "$build/libstarling_cuda.so" ] || { echo "$build/libstarling_cuda.so is missing: build with the CUDA toolkit"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset STARLING_DEVICE_PLUGIN  # the real plugin, found beside libstarling.so
run() { echo "+ $*"; timeout -k 10 600 "$@"; }
t=$build/tests/gpu

echo "== staged path: 2 ranks on GPU 0"
for program in gpu_ops_test gpu_windows_test gpu_bad_input_test; do
  run mpirun -n 2 -x STARLING_GPU_PATH=staged -x STARLING_GPU_CHUNK_BYTES=4096 "$t/$program" \
    --gtest_filter=-*Demanded*
done
if [ "$gpus" -ge 2 ]; then
  echo "== NCCL path: one rank per GPU ($gpus)"
  run mpirun -n "$gpus" -x STARLING_GPU_PATH=nccl -x STARLING_TEST_GPU_PER_RANK=1 -x STARLING_TEST_TOLERANT=1 \
    -x STARLING_GPU_CHUNK_BYTES=4096 -x "EXPECT_PATH=nccl on cuda:" "$t/gpu_ops_test" --gtest_filter=-*Demanded*
else
  echo "== NCCL path: skipped (one GPU; NCCL refuses two ranks on one GPU)"
fi

echo "== Python device arrays: CuPy, JAX on GPU (77: that framework is not installed)"
for framework in cupy jax; do
  PYTHONPATH=$build/python run mpirun -n 2 /usr/bin/python3 examples/python/gpu_arrays.py --framework "$framework" \
    || [ $? -eq 77 ]
done

echo "== benchmark"
bench=$build/examples/benchmarks/starling_bench
run mpirun -n 2 "$bench" --device cuda --gpu-path staged --csv gpu_bench.csv
[ "$gpus" -ge 2 ] && run mpirun -n "$gpus" "$bench" --device cuda --gpu-path nccl --csv gpu_bench.csv
echo "results appended to gpu_bench.csv"
