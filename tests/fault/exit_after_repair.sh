#!/usr/bin/env bash
# Runs exit_after_repair (survivors repair, compute once more, destroy and leave) under
# `mpirun --with-ft ulfm` RUNS times in a row; every run must end with status 0 and
# NP-1 "LEFT" lines, within 60 s.
#   exit_after_repair.sh MPIRUN PROGRAM NP RUNS
set -u
mpirun=$1 program=$2 np=$3 runs=$4
failed=0
for i in $(seq 1 "$runs"); do
  out=$(timeout -k 5 60 "$mpirun" --with-ft ulfm --mca btl ^sm,smcuda,usnic --mca btl_tcp_flags send,inplace,need-ack,need-csum -np "$np" "$program" 2>&1)
  rc=$?
  left=$(grep -c '^LEFT ' <<<"$out")
  if [ "$rc" -ne 0 ] || [ "$left" -ne $((np - 1)) ]; then
    failed=$((failed + 1))
    echo "run $i: mpirun status $rc, $left of $((np - 1)) survivors left cleanly"
    grep -E '^FAILED|-14:' <<<"$out" | head -3 | cut -c1-400
  fi
done
echo "exit_after_repair: $np ranks, $failed of $runs runs failed"
[ "$failed" -eq 0 ]
