"""The one-line notes about a --compare reference (dflash_tui/compare_notes.py): when the
--compare-tol hint applies, and the note that a quantized float16 reference is slow on a
CPU, as probe prints it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dflash_tui.cli import main
from dflash_tui.compare_notes import SLOW_ON_CPU, slow_on_cpu, tol_hint_applies
from dflash_tui.engine.api import load_pair
from dflash_tui.engine.session import SessionOptions


def info(compare, tol=0.01, dtype="float32", backend="cpu", quantization=None, dequantized=False):
    return SimpleNamespace(compare=compare, compare_tol=tol, dtype=dtype, backend=backend,
                           compare_quantization=quantization, compare_dequantized=dequantized,
                           drafter_quantization=None)


@pytest.mark.parametrize("compare, tol, dtype, applies", [
    ("bits=8", 0.01, "float32", True),
    ("dtype=bfloat16", 0.01, "float32", True),
    ("dtype=float32", 0.01, "float32", False),  # the drafter's own type
    ("layer-offset=-1", 0.01, "float32", False),
    ("residual-scale=8", 0.01, "float32", False),
    ("bits=8", 0.05, "float32", False),  # a tolerance of the user's own
    (None, None, "float32", False),
])
def test_the_tol_hint_applies_to_other_numbers_at_the_default_tolerance(compare, tol, dtype, applies):
    assert tol_hint_applies(info(compare, tol, dtype)) == applies


def test_a_reference_the_engine_loaded_quantized_counts_as_quantized(tmp_path):
    # a drafter directory quantized on disk: no `bits=` in the SPEC, the engine says so
    assert tol_hint_applies(info(str(tmp_path), quantization="q4/g64"))
    assert slow_on_cpu(info(str(tmp_path), dtype="float16", quantization="q4/g64")) == SLOW_ON_CPU
    assert not tol_hint_applies(info(str(tmp_path)))  # a float drafter in the same dtype


@pytest.mark.parametrize("compare, applies", [
    ("residual-scale=8", False), ("layer-offset=-1", False),  # the drafter's own packed values
    ("bits=4", True), ("bits=8,group=32", True),  # quantized again from them
    ("dtype=bfloat16", True),
])
def test_a_quantized_drafter_s_own_copy_is_not_a_reference_with_other_numbers(
        quantized_primary, compare, applies):
    """Against a quantized drafter, a residual-scale or layer-offset reference holds the very
    same packed weights (the hint said they computed with other numbers, since the
    reference is quantized: written for a float drafter)."""
    target_dir, draft_dir = quantized_primary
    pair = load_pair(target_dir, draft_dir, compare=compare, keep_quantized=True)
    session = pair.open("hello", options=SessionOptions(gamma=4, max_tokens=4), prefill=False)
    session.close()
    assert session.info.drafter_quantization.startswith("q8/g32")
    assert tol_hint_applies(session.info) == applies


@pytest.fixture(scope="module")
def quantized_primary(make_pair, tmp_path_factory):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    out = tmp_path_factory.mktemp("compare-notes") / "q8"
    assert main(["quantize", str(draft_dir), "--bits", "8", "--group-size", "32", "--out", str(out)]) == 0
    return target_dir, out


@pytest.mark.parametrize("compare, dtype, backend, slow", [
    ("bits=4,dtype=float16", "float32", "cpu", True),
    ("bits=4", "float16", "cpu", True),  # the reference's dtype is the drafter's
    ("bits=4,dtype=float32", "float16", "cpu", False),
    ("bits=4,dtype=float16", "float32", "gpu", False),
    ("bits=4", "float32", "cpu", False),
    ("dtype=float16", "float32", "cpu", False),
])
def test_slow_on_cpu_names_a_quantized_float16_reference_on_a_cpu(compare, dtype, backend, slow):
    assert (slow_on_cpu(info(compare, dtype=dtype, backend=backend)) == SLOW_ON_CPU) == slow


def test_a_reference_dequantized_at_load_is_not_slow(tmp_path):
    # the label still names the packing, but the weights compute in float (dequantize_for_cpu)
    for compare in ("bits=4,dtype=float16", str(tmp_path)):
        assert slow_on_cpu(info(compare, dtype="float16", quantization="q4/g64", dequantized=True)) is None
    assert tol_hint_applies(info("bits=4", quantization="q4/g64", dequantized=True))  # other numbers still


def test_probe_prints_the_slow_note(make_pair, capsys):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    argv = ["probe", str(target_dir), "--prompt", "Hello", "--block", "3", "--rounds", "1"]
    assert main(argv + ["--compare", "bits=4,dtype=float16", "--keep-quantized"]) == 0
    out = capsys.readouterr()
    assert f"note: {SLOW_ON_CPU}" in out.out + out.err
    # without --keep-quantized the CPU computes the reference in float: no quantized matmul
    assert main(argv + ["--compare", "bits=4,dtype=float16"]) == 0
    out = capsys.readouterr()
    assert SLOW_ON_CPU not in out.out + out.err
    assert main(argv + ["--compare", "bits=4"]) == 0
    out = capsys.readouterr()
    assert SLOW_ON_CPU not in out.out + out.err
