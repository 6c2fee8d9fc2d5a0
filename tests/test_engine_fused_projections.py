"""Fused projections (engine/fused_projections.py): a target whose q/k/v and gate/up
projections are one matmul each in its multi-row forwards gives the plain target's logits,
holds every weight once, leaves the model stock between forwards, and decodes losslessly
through the engine.

Both fixture target kinds are loaded from disk twice through load_target, fused and not;
on the CPU fusing is off by default, so `fuse=True` is what a GPU load does.
"""

from __future__ import annotations

from contextlib import nullcontext

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten

from conftest import TARGETS
from greedy import greedy_tokens, load_reference

from dflash_tui.engine import SessionOptions, load_pair
from dflash_tui.engine.fused_projections import Fusion, FusedPart
from dflash_tui.engine.target import load_target

PROMPT = "Seven times eight is"
# groups fused in the 4-layer fixtures: llama has attention and an MLP in every layer; the
# qwen3.5 hybrid has full attention in 2 of its 4 layers (the others are gated DeltaNet)
GROUPS = {"llama": 8, "qwen35": 6}


@pytest.fixture(scope="module")
def targets(make_pair):
    cache = {}

    def get(kind):
        if kind not in cache:
            target_dir, _ = make_pair(kind, "DFlash2DraftModel")
            cache[kind] = (load_target(target_dir, fuse=False), load_target(target_dir, fuse=True))
        return cache[kind]

    return get


@pytest.mark.parametrize("kind", TARGETS)
def test_a_fused_target_gives_the_plain_targets_logits(targets, kind):
    plain, fused = targets(kind)
    assert fused.spec.config["fused_projection_groups"] == GROUPS[kind]
    assert "fused_projection_groups" not in plain.spec.config
    for target in (plain, fused):
        target.reset()
    prompt = mx.array([[3, 17, 42, 5, 9, 11, 60, 2, 8, 30]])
    for rows in (prompt, prompt[:, :8], prompt[:, :1]):  # a prefill, a verify's block, one token
        want, got = plain.forward(rows)[0], fused.forward(rows)[0]
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-5)


def _modules(target, kind):
    return [m for _, m in target.model.named_modules() if isinstance(m, kind)]


@pytest.mark.parametrize("kind", TARGETS)
def test_fused_weights_are_the_plain_weights_held_once(targets, kind):
    plain, fused = targets(kind)
    parts = {"llama": 20, "qwen35": 14}[kind]
    for applied in (False, True):
        with fused.fusion.applied() if applied else nullcontext():
            plain_params = dict(tree_flatten(plain.model.parameters()))
            fused_params = dict(tree_flatten(fused.model.parameters()))
            assert plain_params.keys() == fused_params.keys()  # the names checkpoints use
            for name, weight in plain_params.items():
                assert mx.array_equal(fused_params[name], weight), name
            assert len(_modules(fused, FusedPart)) == (parts if applied else 0)
            assert len(_modules(fused, nn.Linear)) == len(_modules(plain, nn.Linear)) - (parts if applied else 0)
    # the plain projections' weights are views of their group's one array (no weight held
    # twice): the fused weight of a layer's attention is exactly q, k and v stacked
    attention = fused.layers[-1].self_attn
    with fused.fusion.applied():
        product = attention.q_proj._product
    stacked = mx.concatenate([attention.q_proj.weight, attention.k_proj.weight,
                              attention.v_proj.weight])
    assert mx.array_equal(product.weight, stacked)


@pytest.mark.parametrize("kind", TARGETS)
def test_between_forwards_the_model_is_stock_and_decodes_as_mlx_lm_does(targets, make_pair, kind):
    _, fused = targets(kind)
    fused.reset()
    fused.forward(mx.array([[3, 17, 42, 5, 9, 11, 60, 2]]))  # a multi-row forward, fused
    assert not _modules(fused, FusedPart)  # put back after it
    target_dir, _ = make_pair(kind, "DFlash2DraftModel")
    model, _ = load_reference(str(target_dir))
    prompt = [3, 17, 42, 5, 9]
    assert greedy_tokens(fused.model, prompt, 12) == greedy_tokens(model, prompt, 12)


def test_parts_called_in_any_order_or_on_other_inputs_give_their_own_product():
    mx.random.seed(3)
    owner = nn.Module()
    owner.q_proj, owner.k_proj, owner.v_proj = nn.Linear(8, 12), nn.Linear(8, 4), nn.Linear(8, 4)
    layer = nn.Module()
    layer.self_attn = owner
    plain = {n: (owner[n].weight, owner[n].bias) for n in ("q_proj", "k_proj", "v_proj")}
    fusion = Fusion([layer])
    assert fusion.groups == 1
    x, y = mx.random.normal((1, 3, 8)), mx.random.normal((1, 5, 8))
    with fusion.applied():
        for name, inputs in (("v_proj", x), ("q_proj", y), ("k_proj", x), ("q_proj", x), ("v_proj", y)):
            weight, bias = plain[name]
            np.testing.assert_allclose(np.array(owner[name](inputs)),
                                       np.array(inputs @ weight.T + bias), rtol=1e-5, atol=1e-6)
        assert isinstance(owner.q_proj, FusedPart)
    assert type(owner.q_proj) is nn.Linear


def test_unfusable_groups_are_left_alone():
    owner = nn.Module()
    owner.gate_proj = nn.Linear(8, 16, bias=False)
    owner.up_proj = nn.Linear(8, 16, bias=True)  # a bias on one and not the other
    other = nn.Module()
    other.gate_proj = nn.QuantizedLinear(64, 64, bias=False)
    other.up_proj = nn.QuantizedLinear(64, 64, bias=False)
    layers = [nn.Module(), nn.Module()]
    layers[0].mlp, layers[1].mlp = owner, other
    assert Fusion(layers).groups == 0
    assert type(owner.gate_proj) is nn.Linear and type(other.up_proj) is nn.QuantizedLinear


@pytest.mark.parametrize("target_kind", TARGETS)
@pytest.mark.parametrize("gamma", [1, 4, 7])
def test_a_fused_target_decodes_the_targets_greedy_text(make_pair, target_kind, gamma):
    target_dir, draft_dir = make_pair(target_kind, "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir, fuse=True)
    assert pair.target.spec.config["fused_projection_groups"] == GROUPS[target_kind]
    session = pair.open(PROMPT, options=SessionOptions(gamma=gamma, max_tokens=32,
                                                       probes=gamma == 7, ranks=gamma == 7))
    list(session.run())
    session.close()
    model, _ = load_reference(str(target_dir))
    assert session.generated == greedy_tokens(model, session.prompt_ids, 32, session.eos_ids)
