#!/usr/bin/env bash
# Runs an MPI test program twice, with the shared-memory path on and off, each rank
# dumping its results (STARLING_TEST_DUMP_DIR), and checks that both paths gave the same
# bits. Usage: shm_bitwise.sh DIR MPIEXEC-COMMAND...
set -euo pipefail
dir=$1
shift
rm -rf "$dir"
mkdir -p "$dir/on" "$dir/off"
STARLING_SHM=1 STARLING_TEST_DUMP_DIR="$dir/on" timeout -k 10 150 "$@"
STARLING_SHM=0 STARLING_TEST_DUMP_DIR="$dir/off" timeout -k 10 150 "$@"
count=0
for f in "$dir"/on/rank*.bin; do
  cmp "$f" "$dir/off/$(basename "$f")"
  count=$((count + 1))
done
[ "$count" -gt 0 ] || { echo "no results were dumped"; exit 1; }
echo "$count rank(s): identical results with the shared-memory path on and off ($(stat -c %s "$dir/on/rank0.bin") bytes each)"
