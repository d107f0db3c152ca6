#!/usr/bin/env bash
# The sanitizer stage of CI (.ci/run): two separate builds of the library and tests,
#   build-asan  STARLING_SANITIZE=address  ASan + LeakSanitizer + UBSan (UB is fatal)
#   build-tsan  STARLING_SANITIZE=thread   ThreadSanitizer
# each building only what it runs, then the ctest subsets below. Any report fails the
# test that produced it. Suppressions (Open MPI and its libraries only): lsan.supp and
# tsan.supp beside this script.
#   bash tests/sanitize/run.sh [--build-only] [asan] [tsan]
# --build-only: configure and build, run nothing (CI builds them in the background).
set -euo pipefail
cd "$(dirname "$0")/../.."
source packaging/cmake-generator.sh

build_only=0
[ "${1:-}" = --build-only ] && { build_only=1; shift; }
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(asan tsan)
jobs=$(nproc)

# -O1: the usual level for sanitizers (fast to build, stacks still readable); -g1: line
# tables only, enough for file:line in every report at a fraction of -g's build time.
configure() {  # <dir> <sanitizer> [cmake args...]
  local dir=$1 sanitizer=$2
  shift 2
  mkdir -p "$dir"
  # shellcheck disable=SC2046,SC2086  # word splitting of the generator and unity arguments
  cmake -S . -B "$dir" $(cmake_generator "$dir") $STARLING_UNITY -DSTARLING_SANITIZE="$sanitizer" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DPython3_EXECUTABLE=/usr/bin/python3 \
    -DSTARLING_BUILD_EXAMPLES=OFF -DSTARLING_BUILD_JAVA=OFF -DSTARLING_BUILD_JULIA=OFF \
    "$@" > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
}

run_tests() {  # <dir> <ctest regex> [<exclude regex>]
  [ "$build_only" = 1 ] && return 0
  (cd "$1" && ctest --output-on-failure -j"$jobs" -R "$2" ${3:+-E "$3"})
}

mpi_programs=(mpi_collectives_test mpi_neighbor_test mpi_window_test mpi_window_stress_test mpi_bad_input_test
  mpi_context_test mpi_timeout_test mpi_abort_test mpi_shm_test mpi_shm_neighbor_test mpi_mismatch_test
  mpi_scatter_test)
# The CUDA paths on the emulated device (its stream workers and NCCL sockets are threads
# too): staged and NCCL, windows, bad input.
gpu_programs=(gpu_ops_test gpu_windows_test gpu_bad_input_test gpu_unavailable_test starling_emudevice)

for stage in "${stages[@]}"; do
  start=$SECONDS
  case $stage in
    asan)
      # Every MPI program (fused, unfused and small-chunk variants included) and the
      # Python suite on the same library, at the rank counts ctest registers, but (CI
      # time: stage 1 runs them all unsanitized) not the 4-rank runs of programs that also
      # run at 3, the 3- and 4-rank runs of the slowest (window stress, the GPU
      # operations; and their 1-rank runs, 11 s each), nor the 1- and 4-rank Python suite.
      # mpi.mismatch_topologies.np3: the stall notices (kept, reaped and abandoned
      # buffers) and contexts left unusable by a disagreement.
      configure build-asan address
      cmake --build build-asan -j"$jobs" --target "${mpi_programs[@]}" "${gpu_programs[@]}" starling_python
      run_tests build-asan \
        '^(mpi\.(collectives|neighbor|windows|window_stress|bad_input|context|timeout|abort)|mpi\.(shm|scatter)\.np[23]$|mpi\.shm_neighbor\.np2$|mpi\.mismatch_topologies\.np3$|python\.(suite|shutdown|environment)|gpu\.(ops_staged|ops_nccl|windows|bad_input|unavailable_no_device)\.np[1-4])' \
        '^(python\.(suite\.np[14]|environment\.np4)|mpi\.window_stress(_noshm)?\.np[34]|gpu\.ops_(nccl|staged)\.np[134]|(mpi\.(collectives|collectives_machines2|collectives_small_chunks|neighbor|neighbor_uneven_fusion_shm[01]|windows|windows_noshm)|gpu\.windows)\.np4)$'
      ;;
    tsan)
      # The progress engine, fusion and the window service with their threads, at 2
      # and 3 ranks (TSan slows each rank down 5-15x; 2 cores). mpi.shm.np2: the shared-memory
      # probe of context creation (one thread per process touches the segments; the other
      # process's writes are ordered by the allgathers, which TSan cannot see and need not:
      # no two threads of one process share them). mpi.shm_neighbor.np2: neighbor data through
      # the outboxes, where a publication's release may run on either thread of a process
      # (about 17 s under TSan). mpi.windows and mpi.window_stress: same-host windows keep
      # their buffers in shared slots, whose locks and mutex words the caller's thread,
      # the executor and the window service of one process all take (another process's
      # writes into them are ordered by the same locks, which TSan cannot see across
      # processes and need not: it checks each process's own threads). mpi.scatter.np2:
      # all-to-all's blocks read from the board's slots and from the peers' inputs.
      configure build-tsan thread -DSTARLING_BUILD_PYTHON=OFF
      cmake --build build-tsan -j"$jobs" --target mpi_collectives_test mpi_neighbor_test mpi_window_test \
        mpi_window_stress_test mpi_abort_test mpi_shm_test mpi_shm_neighbor_test mpi_scatter_test "${gpu_programs[@]}"
      run_tests build-tsan \
        '^(mpi\.((collectives|neighbor|windows)\.np[23]|(window_stress|abort|shm|shm_neighbor|scatter)\.np2)|gpu\.(ops_staged|ops_nccl|windows)\.np2)$'
      ;;
    *)
      echo "unknown stage '$stage' (asan or tsan)" >&2
      exit 2
      ;;
  esac
  echo "sanitize: $stage $([ "$build_only" = 1 ] && echo built || echo passed) in $((SECONDS - start)) s"
done
