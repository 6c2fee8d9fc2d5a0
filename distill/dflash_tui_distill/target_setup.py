"""Loading the target for distillation, in the precision each phase wants.

The data phase decodes in --data-dtype (float32 by default: the same greedy choices the
engine and bench make in float32). Training reads the target's features in
--target-dtype (auto: bfloat16 on a GPU, float32 on the CPU) and, by default, with a
quantized target dequantized first: dequantization is exact (the same numbers in a wider
type) and on a GPU plain bf16 matmuls are usually faster than quantized ones. On the CPU
the engine already dequantizes small targets when loading.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_map_with_path

from dflash_tui.engine.target import DTYPES, Target, backend, load_target


def resolve_dtype(name: str) -> str:
    if name != "auto":
        return name
    return "float32" if backend() == "cpu" else "bfloat16"


def is_quantized(model: nn.Module) -> bool:
    return any(isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding))
               for _, m in model.named_modules())


def load_for_distill(path, dtype: str, dequantize: bool) -> Target:
    target = load_target(path, resolve_dtype(dtype), keep_quantized=not dequantize)
    if dequantize and is_quantized(target.model):
        from mlx_lm.utils import dequantize_model

        dequantize_model(target.model)
        target = Target(target.model, target.tokenizer, target.spec)  # new module objects
        retype(target, dtype)
    return target


def eval_target(target: Target | None, path) -> Target:
    """The target the eval phase judges with: float32 and dequantized, as `dflash-tui bench`
    runs it by default. The training phase's is reused when it is that already; one kept
    quantized (--keep-quantized) is loaded again dequantized."""
    if target is not None and target_dtype_name(target) == "float32" and not is_quantized(target.model):
        return target
    return load_for_distill(path, "float32", dequantize=True)


def retype(target: Target, dtype: str) -> Target:
    """Cast the target's floating weights in place (module objects stay the same)."""
    mx_dtype = DTYPES[resolve_dtype(dtype)]
    keep = getattr(target.model, "cast_predicate", None) or (lambda path: True)

    def cast(path, x):
        if mx.issubdtype(x.dtype, mx.floating) and keep(path):
            return x.astype(mx_dtype)
        return x

    target.model.update(tree_map_with_path(cast, target.model.parameters()))
    # or every multi-row forward (all of training's) keeps computing the fused q/k/v and
    # gate/up groups in the old type, beside a copy
    target.refresh_fusion()
    mx.eval(target.model.parameters())
    return target


def target_dtype_name(target: Target) -> str:
    # what an embedding row comes out as: a quantized embedding's weight is packed uint32
    dtype = target.embed_tokens(mx.array([0])).dtype
    return {mx.float32: "float32", mx.bfloat16: "bfloat16", mx.float16: "float16"}.get(dtype, str(dtype))
