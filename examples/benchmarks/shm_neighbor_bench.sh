#!/usr/bin/env bash
# neighbor_allreduce through shared memory (STARLING_SHM=1) and through MPI (=0), each
# against raw MPI, memcpy and a local average measured in the same run; the two runs
# alternate `rounds` times so machine noise hits both alike.
# Usage: examples/benchmarks/shm_neighbor_bench.sh [ranks=2] [rounds=3] [extra args...]
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=${1:-2}
rounds=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
for round in $(seq "$rounds"); do
  for shm in 1 0; do
    echo "## round $round"
    STARLING_SHM=$shm timeout 600 mpirun --oversubscribe -n "$ranks" build/examples/benchmarks/shm_neighbor_bench "$@"
  done
done
