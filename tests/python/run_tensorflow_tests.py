"""Runs the TensorFlow tests (test_tensorflow.py) under pytest on every rank.

Exit 77 (ctest: skipped) when TensorFlow cannot be imported, unless
STARLING_REQUIRE_TENSORFLOW=1 (tests/modern/run.sh, whose venv installs tensorflow-cpu
and keras): then a missing TensorFlow is a failure, not a skip."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up notices
try:
    import tensorflow  # noqa: F401
except ImportError as e:
    if os.environ.get("STARLING_REQUIRE_TENSORFLOW") == "1":
        raise
    print(f"skipped: TensorFlow is not importable ({e})")
    sys.exit(77)

import pytest  # noqa: E402

sys.exit(pytest.main(sys.argv[1:]))
