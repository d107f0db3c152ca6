#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz with clang (a build directory of their
# own: the whole core is instrumented) and runs each target for its share of a time
# budget, starting from the seeds in tests/fuzz/corpus/<target>/. Prints the executions
# run per target; fails if any target crashes, trips a sanitizer or hangs (one input
# over 60 s: generous, as machines are shared), leaving the input in
# <build-dir>/artifacts/. Exits 77 (skipped) when clang or libFuzzer is missing.
#
#   tests/fuzz/run_fuzz.sh [--seconds N] [--build-dir DIR] [--targets "tensor wire capi"]
#
# --seconds: total across targets (default 60, or $STARLING_FUZZ_SECONDS). Replay a
# failure with: <build-dir>/tests/fuzz/starling_fuzz_<target> <artifact>.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
source_dir="$(cd "$here/../.." && pwd)"
seconds="${STARLING_FUZZ_SECONDS:-60}"
build_dir="$source_dir/build-fuzz"
targets=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run_fuzz: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$targets" ]; then  # every fuzz_<name>.cc is a target
  targets="$(cd "$here" && echo $(ls fuzz_*.cc | sed 's/^fuzz_//; s/\.cc$//'))"
fi

skip() { echo "run_fuzz: SKIPPED: $1 (bash packaging/install-deps.sh installs clang and libclang-rt-14-dev)"; exit 77; }
cxx="$(command -v clang++ || command -v clang++-14 || true)"
cc="$(command -v clang || command -v clang-14 || true)"
[ -n "$cxx" ] && [ -n "$cc" ] || skip "clang is not installed"
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/probe.cc"
"$cxx" -fsanitize=fuzzer,address "$probe/probe.cc" -o "$probe/probe" 2> "$probe/log" ||
  skip "$cxx cannot link libFuzzer: $(head -1 "$probe/log")"

echo "run_fuzz: building $targets with $cxx in $build_dir"
mkdir -p "$build_dir"
source "$source_dir/packaging/cmake-generator.sh"
# -O1 with line tables only: libFuzzer's usual level, and 17 s less to build here (119 s).
# shellcheck disable=SC2046,SC2086
cmake -S "$source_dir" -B "$build_dir" $(cmake_generator "$build_dir") $STARLING_UNITY -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_COMPILER="$cxx" -DSTARLING_FUZZ=ON -DSTARLING_BUILD_TESTS=OFF -DSTARLING_BUILD_EXAMPLES=OFF \
  -DSTARLING_BUILD_PYTHON=OFF -DSTARLING_BUILD_JAVA=OFF -DSTARLING_BUILD_JULIA=OFF > "$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
cmake --build "$build_dir" -j"$(nproc)" --target $(for t in $targets; do printf 'starling_fuzz_%s ' "$t"; done)

count=$(echo $targets | wc -w)
share=$(( seconds / count > 0 ? seconds / count : 1 ))
mkdir -p "$build_dir/artifacts"
failed=0
total=0
for t in $targets; do
  corpus="$build_dir/corpus/$t"  # grows here; the committed seeds are only read
  mkdir -p "$corpus"
  seeds=()
  [ -d "$here/corpus/$t" ] && seeds=("$here/corpus/$t")
  log="$build_dir/fuzz_$t.log"
  status=0
  "$build_dir/tests/fuzz/starling_fuzz_$t" -max_total_time="$share" -timeout=60 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$t-" "$corpus" "${seeds[@]}" > "$log" 2>&1 ||
    status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  total=$(( total + ${runs:-0} ))
  if [ "$status" -ne 0 ]; then
    failed=1
    echo "run_fuzz: FAILED: $t (exit $status) after ${runs:-?} executions; the end of $log:"
    grep -v -E '^#[0-9]+ +(NEW|REDUCE|pulse|RELOAD)' "$log" | tail -40
    ls "$build_dir/artifacts/$t-"* 2>/dev/null | sed 's/^/run_fuzz: input: /'
  else
    echo "run_fuzz: $t: ${runs:-0} executions in $share s (${rate:-0}/s), no crash"
  fi
done
echo "run_fuzz: $total executions in total across: $targets"
exit $failed
