#!/usr/bin/env bash
# tests/notebooks/run.sh STARLINGRUN PYTHONPATH-ENTRY EXAMPLES-DIR [pytest args...]
# Runs test_interactive.py with an IPYTHONDIR of its own (so its clusters and profiles
# touch nothing else), and on exit, pass or fail, stops its clusters and kills by pid any
# process that still carries that IPYTHONDIR (engines, controllers, kernels, mpirun).
set -u
here=$(cd "$(dirname "$0")" && pwd)
export STARLINGRUN=$1 STARLING_STARLINGRUN=$1 EXAMPLES=$3 STARLING_PYTHON=${STARLING_TEST_PYTHON:-/usr/bin/python3}
export PYTHONPATH=$2${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1 IPP_NONINTERACTIVE=1 PYDEVD_DISABLE_FILE_VALIDATION=1
export IPYTHONDIR=$(mktemp -d /tmp/starling-notebooks.XXXXXX)
export JUPYTER_RUNTIME_DIR=$IPYTHONDIR/runtime
cleanup() {
  for profile in "$IPYTHONDIR"/profile_*; do
    [ -e "$profile/starling/cluster.json" ] && timeout 30 "$STARLINGRUN" stop --profile "${profile##*/profile_}"
  done
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}; pid=${pid%/environ}
    [ "$pid" != $$ ] && { tr "\0" "\n" < "$environ"; } 2>/dev/null | grep -qx "IPYTHONDIR=$IPYTHONDIR" &&
      { echo "notebooks: killing leftover process $pid"; kill -9 "$pid" 2>/dev/null; }
  done
  rm -rf "$IPYTHONDIR"
}
if ! "$STARLING_PYTHON" -c "import ipyparallel, nbclient, nbformat, ipykernel, matplotlib" 2>/dev/null; then
  echo "notebooks: $STARLING_PYTHON lacks ipyparallel, nbclient, nbformat, ipykernel or matplotlib" \
       "(packaging/install-deps.sh installs them)"
  [ "${CI:-}" = true ] && exit 1 || exit 77
fi
trap cleanup EXIT
cd "$here" && timeout -k 10 170 "$STARLING_PYTHON" -m pytest -q --color=no -p no:cacheprovider -s test_interactive.py "${@:4}"
