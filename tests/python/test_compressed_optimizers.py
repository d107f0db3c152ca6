"""The compressed optimizers train test_optimizers' logistic regression (breast-cancer
data split across the ranks) to the single-process accuracy, with fewer bytes on the
wire than uncompressed communication would need."""

import pytest
import torch

import starling.torch as bf
from starling.compression import FP16, Sign, TopK
from conftest import SIZE, _CONTEXT
from test_optimizers import X_SHARD, Y_SHARD, base_optimizer, check, new_model, train


def compression_ratio(before):
    after = bf.mpi_ops.S.context.stats()
    sent = after["bytes_after_compression"] - before["bytes_after_compression"]
    full = after["bytes_before_compression"] - before["bytes_before_compression"]
    return full / sent if sent else float("inf")


@pytest.mark.parametrize("compression,min_ratio", [(TopK(0.1, error_feedback=True), 3.0), (FP16(), 2.0),
                                                  (Sign(error_feedback=True), 5.5)],
                         ids=["topk10%+ef", "fp16", "sign+ef"])  # sign: a 4-byte bias costs 9 bytes
def test_compressed_gradient_allreduce(compression, min_ratio):
    model = new_model()
    optimizer = bf.DistributedCompressedGradientAllreduceOptimizer(base_optimizer("sgd", model, 0.5), model,
                                                                   compression=compression)
    assert isinstance(optimizer, torch.optim.SGD)
    before = bf.mpi_ops.S.context.stats()
    train(model, optimizer, X_SHARD, Y_SHARD)
    ratio = compression_ratio(before)
    check(f"CompressedGradientAllreduce {compression!r} sgd", model, "sgd", 0.5)
    # Every rank averaged the same bytes: the replicas are identical.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    spread = bf.allreduce(flat, average=False, name="spread") - SIZE * flat
    assert float(spread.abs().max()) < 1e-5 * SIZE
    if SIZE > 1:
        assert ratio >= min_ratio, ratio
    bf.compression_reset()


@pytest.mark.parametrize("compression,min_ratio", [(FP16(), 2.0), (TopK(0.25, gamma=0.4), 1.7)],
                         ids=["fp16", "topk25%"])
def test_choco_sgd(compression, min_ratio):
    model = new_model()
    optimizer = bf.DistributedChocoSGDOptimizer(base_optimizer("sgd", model, 0.5), model, compression=compression)
    before = bf.mpi_ops.S.context.stats()
    train(model, optimizer, X_SHARD, Y_SHARD)
    ratio = compression_ratio(before)
    check(f"ChocoSGD {compression!r} sgd", model, "sgd", 0.5)
    if SIZE > 1:
        assert ratio >= min_ratio, ratio
    bf.compression_reset()


def test_bad_compression_argument():
    model = new_model()
    with pytest.raises(TypeError, match="starling.compression"):
        bf.DistributedChocoSGDOptimizer(base_optimizer("sgd", model, 0.5), model, compression="topk")
