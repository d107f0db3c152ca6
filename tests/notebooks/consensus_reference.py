"""The NumPy reference of average consensus on Starling's default topology, shared by
the notebook tests (test_interactive.py, and tests/multihost/notebook_check.py across
namespace hosts)."""

import numpy as np


def exponential_graph_weights(n):
    """BlueFog's exponential-2 graph with uniform weights: rank i averages itself and
    its in-neighbors i - 2^k (mod n)."""
    W = np.zeros((n, n))
    for i in range(n):
        sources = {i} | {(i - 2 ** k) % n for k in range(n.bit_length()) if 2 ** k < n}
        W[i, sorted(sources)] = 1.0 / len(sources)
    return W
