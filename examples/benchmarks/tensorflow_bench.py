"""Per-call cost of the TensorFlow path (starling.tensorflow) against the PyTorch path
(starling.torch): blocking, out-of-place allreduce (average) of float32 tensors, in the
same process, in alternating batches, so both see the same load. Also the same
TensorFlow call inside tf.function (one tf.py_function op per call).

    mpirun -np 2 python examples/benchmarks/tensorflow_bench.py [--sizes 4,4194304] [--rounds 15] [--tf-threads N]

Needs TensorFlow and PyTorch in one environment (tests/modern/run.sh's venv has both).
Prints the median microseconds per call over the rounds (rank 0).
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

import starling.tensorflow as stf  # noqa: E402
import starling.torch as sto  # noqa: E402


def per_call(call, x, calls):
    start = time.perf_counter()
    for _ in range(calls):
        call(x)
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,4194304", help="float32 elements per tensor, comma-separated")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tf-threads", type=int, default=0,
                        help="TensorFlow's intra- and inter-op thread pools (0: TensorFlow's default)")
    args = parser.parse_args()
    if args.tf_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.tf_threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.tf_threads)
    sto.init()
    stf.init()
    graph_allreduce = tf.function(stf.allreduce)
    rows = []
    for elements in (int(s) for s in args.sizes.split(",")):
        data = np.arange(elements, dtype=np.float32)
        paths = {"torch": (sto.allreduce, torch.from_numpy(data.copy())),
                 "tensorflow": (stf.allreduce, tf.constant(data)),
                 "tf.function": (graph_allreduce, tf.constant(data))}
        calls = 200 if elements * 4 < 65536 else 5
        for call, x in paths.values():  # warm-up (and tracing)
            per_call(call, x, 3)
        times = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, (call, x) in paths.items():
                times[name].append(per_call(call, x, calls))
        rows.append((elements * 4, {name: statistics.median(t) for name, t in times.items()}))
    if stf.rank() == 0:
        print(f"allreduce (average), float32, {stf.size()} ranks, median us per call over {args.rounds} "
              "alternating rounds")
        print(f"{'bytes':>10} {'torch':>10} {'tensorflow':>11} {'tf.function':>12} {'tf/torch':>9}")
        for size, t in rows:
            print(f"{size:>10} {t['torch']:>10.1f} {t['tensorflow']:>11.1f} {t['tf.function']:>12.1f} "
                  f"{t['tensorflow'] / t['torch']:>9.2f}")


if __name__ == "__main__":
    main()
