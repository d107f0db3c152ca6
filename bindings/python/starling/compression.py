"""Compressors for ``Context.allreduce`` and ``Context.neighbor_allreduce``.

Pass one as ``compression=``::

    ctx.allreduce(grad, "average", name="grad.w", compression=starling.compression.TopK(0.01, error_feedback=True))
    ctx.neighbor_allreduce(x, name="x", compression=starling.compression.FP16())   # CHOCO gossip

``allreduce``: every rank compresses its tensor (plus its error-feedback residual),
the compressed tensors are gathered and every rank sums them in float64 in rank order
(bit-identical results). ``neighbor_allreduce``: CHOCO gossip with public copies per
name (static topology only), step size ``gamma``. Floating-point tensors only. See the
README section "Compressed communication".
"""

from typing import Optional, Union

from . import _core

__all__ = ["Compression", "FP16", "BF16", "TopK", "RandomK", "Sign"]


class Compression:
    """A compressor and its options (starling_compression_t). error_feedback: allreduce
    keeps what the compression dropped per name and adds it to the next call. gamma:
    CHOCO's consensus step size for neighbor_allreduce, in (0, 1]."""

    compressor = _core.STARLING_COMPRESS_NONE

    def __init__(self, *, error_feedback: bool = False, gamma: float = 1.0, k: int = 0, ratio: float = 0.0,
                 seed: int = 0) -> None:
        self.error_feedback = bool(error_feedback)
        self.gamma = float(gamma)
        self.k = int(k)
        self.ratio = float(ratio)
        self.seed = int(seed)

    def _args(self):
        """(compressor, k, ratio, seed, error_feedback, gamma) for the C call."""
        return (self.compressor, self.k, self.ratio, self.seed, int(self.error_feedback), self.gamma)

    def __repr__(self) -> str:
        fields = []
        if self.k:
            fields.append(f"k={self.k}")
        if self.ratio:
            fields.append(f"ratio={self.ratio}")
        if self.seed:
            fields.append(f"seed={self.seed}")
        if self.error_feedback:
            fields.append("error_feedback=True")
        if self.gamma != 1.0:
            fields.append(f"gamma={self.gamma}")
        return f"{type(self).__name__}({', '.join(fields)})"


class FP16(Compression):
    """Every element rounded to float16 (finite values saturate at +-65504)."""
    compressor = _core.STARLING_COMPRESS_FLOAT16

    def __init__(self, *, error_feedback: bool = False, gamma: float = 1.0) -> None:
        super().__init__(error_feedback=error_feedback, gamma=gamma)


class BF16(Compression):
    """Every element rounded to bfloat16."""
    compressor = _core.STARLING_COMPRESS_BFLOAT16

    def __init__(self, *, error_feedback: bool = False, gamma: float = 1.0) -> None:
        super().__init__(error_feedback=error_feedback, gamma=gamma)


def _k_or_ratio(amount: Union[int, float]):
    """An int is a count of elements, a float a fraction of them."""
    if isinstance(amount, bool):
        raise TypeError("k or ratio must be an int (elements) or a float (fraction), not bool")
    if isinstance(amount, int):
        return amount, 0.0
    return 0, float(amount)


class TopK(Compression):
    """The elements of largest magnitude: TopK(0.01) keeps 1% (a float is a fraction),
    TopK(100) keeps 100 (an int is a count)."""
    compressor = _core.STARLING_COMPRESS_TOPK

    def __init__(self, amount: Union[int, float], *, error_feedback: bool = False, gamma: float = 1.0) -> None:
        k, ratio = _k_or_ratio(amount)
        super().__init__(error_feedback=error_feedback, gamma=gamma, k=k, ratio=ratio)


class RandomK(Compression):
    """Elements chosen at random from (seed, name, step) alike on every rank, so no
    indices travel; amount as for TopK. Not rescaled: use error feedback or CHOCO."""
    compressor = _core.STARLING_COMPRESS_RANDOMK

    def __init__(self, amount: Union[int, float], *, seed: int = 0, error_feedback: bool = False,
                 gamma: float = 1.0) -> None:
        k, ratio = _k_or_ratio(amount)
        super().__init__(error_feedback=error_feedback, gamma=gamma, k=k, ratio=ratio, seed=seed)


class Sign(Compression):
    """One bit per element and one scale per tensor (the mean magnitude)."""
    compressor = _core.STARLING_COMPRESS_SIGN

    def __init__(self, *, error_feedback: bool = False, gamma: float = 1.0) -> None:
        super().__init__(error_feedback=error_feedback, gamma=gamma)


def as_args(compression: Optional[Compression]):
    if not isinstance(compression, Compression):
        raise TypeError(f"compression must be a starling.compression.Compression (e.g. TopK(0.01)), "
                        f"not {type(compression).__name__}")
    return compression._args()
