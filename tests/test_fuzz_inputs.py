"""Property-based: whatever a drafter's config.json, a safetensors header or a trace line
holds, loading it ends in a one-line InputError or in something that runs; never in any
other exception. Inputs are real files read through the public loaders (load_drafter, the
session, replay's load), so the properties hold whoever changes the loaders' insides.

Bounded: each property draws a fixed number of examples from a fixed seed (no deadline:
the first MLX calls are slow; no shrinking, which can take minutes), a few seconds each on
a laptop CPU. A failure prints the example as drawn.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fixtures import drafter_tensors, write_drafter

from dflash_tui.app.replay import load
from dflash_tui.app.rounds import record_at_stage, text_before
from dflash_tui.engine.errors import InputError
from dflash_tui.snapshot import round_from_json

FUZZ = settings(deadline=None, derandomize=True, database=None,
                phases=(Phase.explicit, Phase.generate),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Values a hand-edited or corrupted JSON file can hold, biased toward plausible numbers.
SCALARS = (st.none() | st.booleans() | st.integers(-3, 70) | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


# ---- drafter config.json -------------------------------------------------------------------

@pytest.fixture(scope="module")
def drafter_case(make_pair, tmp_path_factory):
    """The fixture target (loaded once), and a drafter directory whose config.json each
    example rewrites beside valid weights."""
    from dflash_tui.engine.target import load_target

    target_dir, draft = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft / "config.json").read_text())
    directory = write_drafter(tmp_path_factory.mktemp("fuzz") / "draft", config,
                              tensors=drafter_tensors(config))
    return load_target(target_dir), directory, config


def _keys(config: dict) -> list[str]:
    nested = ["dflash_config." + k for k in config["dflash_config"]]
    extra = ["sliding_window", "rope_parameters", "rope_scaling", "is_causal", "block_size",
             "dflash_config.input_embedding_scale", "dflash_config.output_multiplier",
             "dflash_config.final_logit_softcapping"]
    return sorted(set(config) | set(nested) | set(extra))


def _mutate(config: dict, edits) -> dict:
    config = json.loads(json.dumps(config))
    for key, delete, value in edits:
        owner, name = config, key
        if key.startswith("dflash_config."):
            owner, name = config.get("dflash_config"), key.split(".", 1)[1]
            if not isinstance(owner, dict):
                continue
        if delete:
            owner.pop(name, None)
        else:
            owner[name] = value
    return config


def _runs_or_refuses(target, directory: Path) -> None:
    """load_drafter, then one round of a session: each may refuse, none may crash."""
    import mlx.core as mx

    from dflash_tui.engine.api import Pair
    from dflash_tui.engine.checkpoint import load_drafter
    from dflash_tui.engine.session import SessionOptions

    try:
        drafter = load_drafter(directory, mx.float32)
        session = Pair(target, drafter, directory).open(
            "Hi", options=SessionOptions(max_tokens=3, probes=False))
        session.step_round()
        session.close()
    except InputError as error:
        assert "\n" not in str(error) and str(error)


@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_any_drafter_config_is_refused_in_one_line_or_runs(drafter_case, data):
    target, directory, config = drafter_case
    edits = data.draw(st.lists(st.tuples(st.sampled_from(_keys(config)), st.booleans(), VALUES),
                               min_size=1, max_size=3))
    (directory / "config.json").write_text(json.dumps(_mutate(config, edits)))
    _runs_or_refuses(target, directory)


# ---- safetensors headers -------------------------------------------------------------------

ENTRY = st.fixed_dictionaries({}, optional={
    "dtype": st.sampled_from(["F32", "F16", "BF16", "I8", "U8", "F64", "Q4", ""]) | SCALARS,
    "shape": st.lists(st.integers(-2, 2**40), max_size=3) | VALUES,
    "data_offsets": st.lists(st.integers(-4, 2**40), min_size=0, max_size=3) | VALUES,
})


@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_any_safetensors_header_is_refused_in_one_line_or_runs(drafter_case, tmp_path, data):
    target, directory, config = drafter_case
    case = tmp_path / "draft"
    case.mkdir(exist_ok=True)
    (case / "config.json").write_text(json.dumps(config))
    names = st.sampled_from(["fc.weight", "norm.weight", "layers.0.mlp.up_proj.weight",
                             "__metadata__"]) | st.text(max_size=10)
    header = data.draw(st.one_of(
        st.dictionaries(names, ENTRY | VALUES, max_size=4).map(lambda h: json.dumps(h).encode()),
        st.binary(max_size=64)))
    declared = data.draw(st.sampled_from([len(header), len(header) + 7, 0, 2**63 - 1])
                         | st.integers(0, 2**64 - 1))
    body = data.draw(st.binary(max_size=256))
    (case / "model.safetensors").write_bytes(struct.pack("<Q", declared) + header + body)
    _runs_or_refuses(target, case)


# ---- trace lines ---------------------------------------------------------------------------

def _set_at(obj, path: list, value):
    """Replace the value at `path` (keys / indexes, followed as far as they exist)."""
    for step in path[:-1]:
        if isinstance(obj, dict) and obj:
            obj = obj[sorted(obj)[step % len(obj)]]
        elif isinstance(obj, list) and obj:
            obj = obj[step % len(obj)]
        else:
            return
    if isinstance(obj, dict) and obj:
        obj[sorted(obj)[path[-1] % len(obj)]] = value
    elif isinstance(obj, list) and obj:
        obj[path[-1] % len(obj)] = value


@st.composite
def damaged_line(draw, line: bytes) -> bytes:
    how = draw(st.sampled_from(["bytes", "cut", "value"]))
    if how == "bytes":
        start = draw(st.integers(0, len(line)))
        return line[:start] + draw(st.binary(min_size=1, max_size=40)) + line[start + draw(st.integers(0, 40)):]
    if how == "cut":
        return line[: draw(st.integers(0, len(line)))]
    obj = json.loads(line)
    _set_at(obj, draw(st.lists(st.integers(0, 50), min_size=1, max_size=4)), draw(VALUES))
    return json.dumps(obj).encode()


@pytest.fixture(scope="module")
def trace(recorded):
    return recorded[0]  # the path alone (hypothesis prints the arguments of a failure)


@settings(FUZZ, max_examples=100)
@given(data=st.data())
def test_any_damaged_trace_is_refused_in_one_line_or_replays(trace, tmp_path, data):
    """Only damaged lines are lost: every intact round comes back, whatever the damage
    elsewhere, and replay can step through every stage of every round it loaded."""
    lines = trace.read_bytes().splitlines()  # a header, then three rounds
    damaged = data.draw(st.lists(st.integers(0, len(lines) - 1), min_size=1, max_size=3, unique=True))
    intact = [round_from_json(json.loads(lines[i])) for i in range(1, len(lines)) if i not in damaged]
    for i in damaged:
        lines[i] = data.draw(damaged_line(lines[i]))
    fuzzed = tmp_path / "fuzzed.jsonl"
    fuzzed.write_bytes(b"\n".join(lines) + b"\n")
    try:
        loaded = load(fuzzed)
    except InputError as error:
        assert not intact, f"refused a trace with {len(intact)} intact rounds: {error}"
        assert "\n" not in str(error)
        return
    rounds = [r for session in loaded.sessions for r in session.rounds]
    assert all(r in rounds for r in intact)
    assert loaded.skipped <= len(damaged)
    for session in loaded.sessions:  # what the replay app does with each round
        previous = session.prefill.first_text if session.prefill else None
        for record in session.rounds:
            before = text_before(record, previous)
            for stage in range(len(record.stages)):
                record_at_stage(record, stage, before)
            previous = record.committed_text
