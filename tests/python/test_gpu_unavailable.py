"""CUDA tensors where no usable device plugin is found (ctest points STARLING_DEVICE_PLUGIN
at a missing file and STARLING_EMU_LIBRARY at the emulator, which only allocates the test
arrays): every call on them fails with UnsupportedError naming what is missing, and the
context keeps working for CPU tensors."""

import os

import numpy as np
import pytest

if not os.environ.get("STARLING_EMU_LIBRARY"):
    pytest.skip("needs STARLING_EMU_LIBRARY: run by ctest", allow_module_level=True)

import starling  # noqa: E402
import emu_array  # noqa: E402
from emu_array import EmuArray  # noqa: E402
from conftest import RANK, SIZE  # noqa: E402

starling.register_array_type(EmuArray, current_stream=lambda x: emu_array.current_stream, mutable=True)


def test_every_kind_of_call_is_refused_cleanly(ctx):
    x = EmuArray.from_numpy(np.full(4, float(RANK), np.float32))
    missing = r"in is on cuda:0: STARLING_DEVICE_PLUGIN=.* could not be loaded"
    with pytest.raises(starling.UnsupportedError, match=missing):
        ctx.allreduce(x)
    with pytest.raises(starling.UnsupportedError, match=missing):
        ctx.neighbor_allreduce_nonblocking(x, out=x)
    with pytest.raises(starling.UnsupportedError, match="could not be loaded"):
        ctx.allgather(x)
    with pytest.raises(starling.UnsupportedError, match="could not be loaded"):
        ctx.window(x, "gpu.unavailable")
    assert ctx.windows == [] and ctx.gpu_path.startswith("none") and ctx.stats()["gpu_path"] == "none"
    assert starling.get_cuda_stream() == 0  # restored after each failed call
    # The context is unharmed: CPU tensors still work, on every rank.
    assert np.all(ctx.allreduce(np.ones(3)) == SIZE)
