"""`dflash-tui quantize`: what it writes (MLX's own quantization, mlx-lm's layout), that every
command opens the result as it opens a float drafter, and its refusals."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import mlx.core as mx
import pytest

from greedy import greedy_tokens, load_reference
from quantized_drafters import float_drafter
from app_helpers import launch, wait_loaded

from dflash_tui.app.live import LiveApp
from dflash_tui.cli import main
from dflash_tui.engine import SessionOptions, load_drafter, load_pair
from dflash_tui.engine.checkpoint import expected_shapes
from dflash_tui.engine.draft_config import read_config

PROMPT = "The rain in Spain"


@pytest.fixture(scope="module")
def source(make_pair, tmp_path_factory):
    """(target_dir, a float DFlash2 drafter for it whose codebooks split into groups of 32)."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    return target_dir, float_drafter(target_dir, tmp_path_factory.mktemp("src") / "float")


def quantize(capsys, *argv) -> tuple[int, list[str]]:
    capsys.readouterr()
    rc = main(["quantize", *map(str, argv)])
    return rc, capsys.readouterr().err.strip().splitlines()


def _linear_inputs(draft_dir: Path) -> dict[str, int]:
    """Each quantizable module's input width, read from the float checkpoint's shapes."""
    shapes = expected_shapes(read_config(draft_dir / "config.json"))
    widths = {name[: -len(".weight")]: shape[-1] for name, shape in shapes.items()
              if name.endswith("proj.weight") or name == "fc.weight"}
    widths.update({name: shape[-1] for name, shape in shapes.items() if name.endswith("_codebook")})
    return widths


@pytest.mark.parametrize("group_size", [32, 64, 128])
@pytest.mark.parametrize("bits", [2, 3, 4, 6, 8])
def test_every_setting_quantizes_what_splits_into_groups_and_decodes_losslessly(
        source, tmp_path, capsys, bits, group_size):
    target_dir, draft = source
    out = tmp_path / "q"
    rc, err = quantize(capsys, draft, "--bits", bits, "--group-size", group_size, "--out", out)
    assert rc == 0, err
    tensors = mx.load(str(out / "model.safetensors"))
    for path, width in _linear_inputs(draft).items():
        packed = width % group_size == 0  # as mlx-lm's quantize_model decides
        assert (f"{path}.scales" in tensors) is packed, path
        if packed:
            assert tensors[f"{path}.weight"].dtype == mx.uint32
            assert tensors[f"{path}.weight"].shape[-1] == width * bits // 32
            assert tensors[f"{path}.scales"].shape[-1] == width // group_size
        else:  # float, under Z Lab's own name (codebooks without `.weight`)
            assert (path if path.endswith("_codebook") else f"{path}.weight") in tensors
    pair = load_pair(target_dir, out)
    session = pair.open(PROMPT, options=SessionOptions(gamma=4, max_tokens=8))
    list(session.run())
    session.close()
    assert session.info.drafter_quantization.startswith(f"q{bits}/g{group_size}")
    model, _ = load_reference(str(target_dir))
    assert session.generated == greedy_tokens(model, session.prompt_ids, 8, session.eos_ids)


def test_keep_leaves_modules_float_and_the_settings_are_recorded(source, tmp_path, capsys):
    _, draft = source
    out = tmp_path / "q"
    rc, err = quantize(capsys, draft, "--bits", 4, "--group-size", 32, "--keep", "selector,fc,selector",
                       "--out", out)  # a name given twice is recorded once
    assert rc == 0 and "q4/g32, float: selector, fc" in err[-1]
    tensors = mx.load(str(out / "model.safetensors"))
    assert tensors["fc.weight"].dtype == tensors["candidate_selector.predecessor_codebook"].dtype == mx.float32
    assert "candidate_selector.hidden_projection.scales" not in tensors
    assert "layers.0.mlp.up_proj.scales" in tensors
    config = json.loads((out / "config.json").read_text())
    assert config["quantization"] == {"group_size": 32, "bits": 4, "mode": "affine"}
    record = config["dflash_tui_quantize"]
    assert record["source"] == str(draft.resolve())
    assert (record["bits"], record["group_size"], record["keep"]) == (4, 32, ["selector", "fc"])
    assert set(record["float"]) == {"fc", "candidate_selector.hidden_projection",
                                    "candidate_selector.predecessor_codebook",
                                    "candidate_selector.successor_codebook"}
    assert load_drafter(out).config.extra["dflash_tui_quantize"] == record


@pytest.fixture(scope="module")
def quantized(source, tmp_path_factory):
    _, draft = source
    out = tmp_path_factory.mktemp("q") / "q4"
    assert main(["quantize", str(draft), "--bits", "4", "--out", str(out)]) == 0
    return out


def test_probe_and_bench_open_a_quantized_drafter(source, quantized, tmp_path, capsys):
    target_dir, _ = source
    assert main(["probe", str(target_dir), "--draft", str(quantized), "--prompt", PROMPT,
                 "--rounds", "2"]) == 0
    prompts = tmp_path / "prompts" / "prose"
    prompts.mkdir(parents=True)
    (prompts / "01.txt").write_text(PROMPT + "\n")
    assert main(["bench", str(target_dir), "--draft", str(quantized), "--prompts",
                 str(prompts.parent), "--blocks", "2", "--max-tokens", "6"]) == 0


def test_the_tui_opens_a_quantized_drafter(source, quantized, tmp_path):
    target_dir, _ = source

    async def scenario():
        app = LiveApp(launch((target_dir, quantized)), show_timings=False, export_dir=tmp_path / "sessions")
        async with app.run_test(size=(120, 35)) as pilot:
            await wait_loaded(pilot)
            assert app.info.drafter_quantization == "q4/g64, float: codebooks"

    asyncio.run(scenario())


def _refused(capsys, argv, needles, out: Path):
    before = sorted(out.parent.iterdir()) if out.parent.exists() else []
    rc, err = quantize(capsys, *argv)
    assert rc == 2 and len(err) == 1, err
    for needle in needles:
        assert needle in err[0], (needle, err[0])
    assert (sorted(out.parent.iterdir()) if out.parent.exists() else []) == before  # nothing written


@pytest.mark.parametrize("flags,needles", [
    (["--bits", "5"], ["--bits", "invalid choice: 5"]),
    (["--bits", "four"], ["--bits", "'four'"]),
    (["--bits", "4", "--group-size", "48"], ["--group-size", "invalid choice: 48"]),
    (["--bits", "4", "--keep", "nope"], ["--keep nope", "matches no quantizable module"]),
    (["--bits", "4", "--keep", "fc,,mlp"], ["--keep 'fc,,mlp'", "none empty"]),
])
def test_bad_flags_are_one_line(source, tmp_path, capsys, flags, needles):
    _, draft = source
    out = tmp_path / "q"
    _refused(capsys, [draft, *flags, "--out", out], needles, out)


def test_keep_selector_on_a_dflash_drafter_is_refused(make_pair, tmp_path, capsys):
    _, draft = make_pair("llama", "DFlashDraftModel")
    out = tmp_path / "q"
    _refused(capsys, [draft, "--bits", "4", "--keep", "selector", "--out", out],
             ["--keep selector", "matches no quantizable module"], out)


def test_out_must_be_new_or_empty(source, tmp_path, capsys):
    _, draft = source
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    _refused(capsys, [draft, "--bits", "4", "--out", full], [str(full), "not empty"], full)
    assert (full / "notes.txt").read_text() == "mine"
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    _refused(capsys, [draft, "--bits", "4", "--out", a_file], [str(a_file), "is a file"], a_file)
    _refused(capsys, [draft, "--bits", "4", "--out", tmp_path / "no" / "q"], ["does not exist"],
             tmp_path / "no" / "q")
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, err = quantize(capsys, draft, "--bits", "8", "--out", empty)
    assert rc == 0, err
    assert read_config(empty / "config.json").quantization["bits"] == 8


def test_an_already_quantized_drafter_is_refused(quantized, tmp_path, capsys):
    out = tmp_path / "again"
    _refused(capsys, [quantized, "--bits", "2", "--out", out], [str(quantized), "already quantized (q4/g64"], out)


def test_a_failed_write_leaves_nothing(source, tmp_path, capsys, monkeypatch):
    """A full disk mid-save: one line, and neither OUT nor a temp folder is left behind."""
    from dflash_tui.engine import checkpoint

    real = checkpoint.save_drafter

    def save_then_fail(model, directory, **kwargs):
        real(model, directory, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "save_drafter", save_then_fail)
    _, draft = source
    out = tmp_path / "q"
    _refused(capsys, [draft, "--bits", "4", "--out", out], [str(out), "No space left on device"], out)


def test_the_nothing_quantized_check_is_the_predicate_s_own_verdict(source, monkeypatch):
    """The refusal asks `choose_predicate` what it would quantize rather than restating its
    rule: a predicate that picks nothing is refused even where every width splits into
    groups (the restated rule passed it, and a float copy was labelled quantized)."""
    from dflash_tui.engine import quantize as q
    from dflash_tui.engine.checkpoint import load_drafter as load

    _, draft = source
    model = load(draft, dtype=None)
    monkeypatch.setattr(q, "choose_predicate", lambda *args: lambda path, module: False)
    with pytest.raises(q.InputError, match="nothing would be quantized in groups of 64"):
        q.quantize_drafter(model, 4, 64, where=str(draft))
    assert q.describe(model) is None and model.config.quantization is None


def test_a_bad_drafter_folder_is_named_as_given_not_as_a_draft_flag(source, tmp_path, capsys):
    """quantize takes DRAFT_DIR as its first argument; it has no --draft option to name."""
    target_dir, _ = source
    out = tmp_path / "q"
    missing = tmp_path / "nope"
    _refused(capsys, [missing, "--bits", "4", "--out", out],
             [f"error: {missing}: no such drafter directory"], out)
    _refused(capsys, [target_dir, "--bits", "4", "--out", out],
             [f"error: {target_dir}/config.json: looks like a target model"], out)
    rc, err = quantize(capsys, missing, "--bits", "4", "--out", out)
    assert "--draft" not in err[0]
