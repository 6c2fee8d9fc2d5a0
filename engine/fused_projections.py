"""One matmul where a decoder layer makes several from the same input, for the target's
multi-row forwards (the verify's block, the prefill).

An attention computes q, k and v from the same normed rows, and a gated MLP its gate and up
projections. At a verify's few rows MLX's CUDA matmul costs about as much whatever the
projection's width (H200, bfloat16, 8 rows: 4096 -> 4096 takes 28 us, 4096 -> 6144 27 us,
where one row takes 15 us), so three projections cost nearly three times one; fused, a
group reads its weights once as one matrix. A one-token forward measured slower fused, so
the fusion is applied only around the engine's own forwards of more than one row
(`Fusion.applied`, from `Target.forward`); at every other time the model holds its plain
`nn.Linear` projections, and mlx-lm's own decode of it (the benches' "target alone") is
stock. docs/PERFORMANCE.md, "Fused projections", has the measurements.

`Fusion(layers)` concatenates each group's weights (and biases) into one array, once, and
points the plain projections' weights at views of it, so no weight is held twice. While
applied, small stand-ins take the projections' places: the first one called with an input
computes the group's product, and the others, called with the same input array (mlx-lm's
attention and MLP call them one after another on the same `x`), return their columns of
it. A stand-in called with another input computes the product for that input, so the
result is the same whatever order a model calls them in.

Only plain `nn.Linear` groups of one input width and dtype, with biases on all or none, are
fused; quantized, sharded or otherwise different projections are left as they are.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

import mlx.core as mx
import mlx.nn as nn

# (owner attribute, projections that read the same input)
GROUPS = (
    ("self_attn", ("q_proj", "k_proj", "v_proj")),
    ("mlp", ("gate_proj", "up_proj")),
)


class _Product:
    """The fused weights of one group and the product last computed from them."""

    def __init__(self, weight: mx.array, bias: Optional[mx.array], bounds: list[tuple[int, int]]):
        self.weight, self.bias, self.bounds = weight, bias, bounds
        self._input: Optional[mx.array] = None
        self._output: Optional[mx.array] = None
        self._taken = 0

    def columns(self, x: mx.array, part: int) -> mx.array:
        if x is not self._input:
            w = self.weight
            self._output = x @ w.T if self.bias is None else mx.addmm(self.bias, x, w.T)
            self._input, self._taken = x, 0
        start, stop = self.bounds[part]
        out = self._output[..., start:stop]
        self._taken += 1
        if self._taken == len(self.bounds):  # every part has its columns: hold nothing
            self.release()
        return out

    def release(self) -> None:
        self._input = self._output = None


class FusedPart(nn.Module):
    """Stands in for one projection of a fused group: its columns of the group's product."""

    def __init__(self, product: _Product, plain: nn.Linear, part: int):
        super().__init__()
        self.weight = plain.weight  # the same view: code reading the weights finds them
        if "bias" in plain:
            self.bias = plain.bias
        object.__setattr__(self, "_product", product)  # not a child: its arrays are the views
        object.__setattr__(self, "_part", part)

    def __call__(self, x: mx.array) -> mx.array:
        return self._product.columns(x, self._part)


def _fusable(linears: list) -> bool:
    if len(linears) < 2 or any(type(m) is not nn.Linear for m in linears):
        return False
    widths = {m.weight.shape[1] for m in linears}
    dtypes = {m.weight.dtype for m in linears}
    biased = {"bias" in m for m in linears}
    return len(widths) == 1 and len(dtypes) == 1 and len(biased) == 1


class Fusion:
    """The fusable projection groups of `layers` (decoder layers), fused once; `applied()`
    puts the fused stand-ins in place for the length of a `with` block."""

    def __init__(self, layers: list):
        # (owner module, projection names, the plain modules, their stand-ins, the product)
        self._groups: list[tuple[nn.Module, tuple[str, ...], list, list, _Product]] = []
        for layer in layers:
            for owner_name, names in GROUPS:
                owner = getattr(layer, owner_name, None)
                if not isinstance(owner, nn.Module):
                    continue
                plain = [getattr(owner, name, None) for name in names]
                if _fusable(plain):
                    self._groups.append(self._fuse(owner, names, plain))

    @staticmethod
    def _fuse(owner: nn.Module, names: tuple[str, ...], plain: list):
        weight = mx.concatenate([m.weight for m in plain], axis=0)
        bias = mx.concatenate([m.bias for m in plain]) if "bias" in plain[0] else None
        bounds, start = [], 0
        for m in plain:
            bounds.append((start, start + m.weight.shape[0]))
            start += m.weight.shape[0]
        for m, (a, b) in zip(plain, bounds):  # the plain weights become views of the fused
            m.weight = weight[a:b]
            if bias is not None:
                m.bias = bias[a:b]
        mx.eval(weight, bias, [m.parameters() for m in plain])
        product = _Product(weight, bias, bounds)
        parts = [FusedPart(product, m, i) for i, m in enumerate(plain)]
        return owner, names, plain, parts, product

    @property
    def groups(self) -> int:
        return len(self._groups)

    @contextmanager
    def applied(self) -> Iterator[None]:
        for owner, names, _, parts, _ in self._groups:
            for name, part in zip(names, parts):
                setattr(owner, name, part)
        try:
            yield
        finally:
            for owner, names, plain, _, product in self._groups:
                for name, module in zip(names, plain):
                    setattr(owner, name, module)
                product.release()
