#!/usr/bin/env bash
# pip install of the starling package, offline, into a fresh venv that sees Debian's
# packages (--system-site-packages), then a 2-rank smoke test of the installed copy.
#   install_test.sh <source dir> <cmake build dir to reuse> <mpiexec>
set -euo pipefail
source_dir=$1 build_dir=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
STARLING_CMAKE_BUILD_DIR="$build_dir" "$work/venv/bin/python" -m pip install --quiet --no-index \
  --no-build-isolation --no-deps "$source_dir/bindings/python"
unset PYTHONPATH
cd "$work"
files=$("$work/venv/bin/python" -m pip show --files starling)
for f in starling/__core.so starling/libstarling.so.0 starling/torch/optimizers.py; do
  grep -q "$f" <<<"$files" || { echo "install_test: $f was not installed"; exit 1; }
done
cat > "$work/smoke.py" <<'PY'
import sys
import numpy as np
import torch
import starling
import starling.torch as bf
assert starling.__file__.startswith(sys.argv[1]), f"imported {starling.__file__}, not the installed copy"
bf.init()
rank = bf.rank()
y = bf.allreduce(torch.full((3,), float(bf.rank())))
assert torch.allclose(y, torch.full((3,), (bf.size() - 1) / 2))
with starling.Context() as ctx:
    assert np.all(ctx.neighbor_allreduce(np.ones(4)) == 1)
assert starling.library_version() == starling.__version__
bf.shutdown()
if rank == 0:
    print("installed starling", starling.__version__, "from", starling.__file__)
PY
timeout -k 5 120 "$mpiexec" -n 2 "$work/venv/bin/python" "$work/smoke.py" "$work"
