"""What the generated module (starling._core) returns for a C call with outputs: the
status becomes None, one output replaces it, two make a list. SWIG 4.3 changed its own
helper for this (a status function then returned [None, output]), so the binding uses
its own (swig/python/starling_python.i); these tests hold it to the same answers under
every SWIG that builds it (Debian's 4.1 in the main build, PyPI's newest in
tests/modern/run.sh)."""

import numpy as np

import starling
from starling import _core
from conftest import RANK, SIZE


def test_int_outputs_are_ints(ctx):
    answers = [_core.rank(ctx._handle), _core.size(ctx._handle), _core.fault_tolerant(ctx._handle),
               _core.dtype_supported((2, 32, 1)), _core.dtype_supported((2, 8, 1))]
    assert all(type(a) is int for a in answers), answers
    assert answers[:2] == [RANK, SIZE]
    assert answers[3:] == [1, 0]  # float32 reduces; an 8-bit float does not


def test_topology_outputs(ctx):
    topology = starling.Topology.ring(SIZE)
    handle = topology._handle
    assert (_core.topology_size(handle), _core.topology_num_edges(handle)) == (SIZE, len(topology.edges))
    assert type(_core.topology_is_regular(handle)) is int


def test_handle_and_flag_are_a_list_of_two():
    with starling.Context() as own:  # its own context: the shared one keeps its topology
        own.set_topology(starling.Topology.ring(SIZE), weighted=True)
        answer = _core.get_topology(own._handle)
        assert type(answer) is list and len(answer) == 2, answer
        assert answer[1] == 1
        assert starling.Topology._adopt(answer[0]).size == SIZE
        assert own.topology_weighted is True


def test_text_stream_and_double_outputs(ctx):
    path = _core.gpu_path(ctx._handle)
    assert type(path) is str and path, path
    stream = _core.get_cuda_stream()
    assert type(stream) is int, stream
    with starling.Context() as own:
        window = own.window(np.zeros(3), "binding_outputs")
        p = _core.window_associated_p(window._handle)
        window.free()
    assert type(p) is float, p
