"""The benchmark scripts run, at tiny sizes, and what they rely on holds: the engine and Z
Lab's loop decode mlx-lm's greedy text; forced proposals are all accepted at real-scale
structure; a sliding layer's buffers stay flat over many rounds. (Their timings are not
tested: a timing is reported, never asserted.)"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import mlx.core as mx
import pytest

from mlx.utils import tree_flatten

from benchmarks import (bench_block_attention, bench_long_context, bench_real_scale,
                        bench_vs_reference, probe_cost, profile_round, zlab)
from benchmarks.common import mlx_lm_greedy
from benchmarks.synthetic import TINY, synthetic_pair
from dflash_tui.engine.session import Session, SessionOptions
from dflash_tui.engine import block_attention, probes


def test_side_by_side_decodes_are_identical(make_pair):
    pytest.importorskip("dflash.model_mlx")
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    result = bench_vs_reference.main([str(target_dir), "--draft", str(draft_dir), "--prompts", "2",
                                      "--tokens", "12", "--repeats", "1", "--block", "4"])
    assert result["identical"] and result["mismatches"] == []
    methods = result["methods"]
    assert set(methods) == {bench_vs_reference.TARGET, bench_vs_reference.ZLAB,
                            bench_vs_reference.ENGINE_SPEED, bench_vs_reference.ENGINE_TUI}
    assert len({m["decode_tokens"] for m in methods.values()}) == 1  # the same text everywhere
    zlab, engine = methods[bench_vs_reference.ZLAB], methods[bench_vs_reference.ENGINE_SPEED]
    assert zlab["rounds"] == engine["rounds"] > 0  # and the same rounds


def test_real_scale_forcing_accepts_every_proposal():
    result = bench_real_scale.main(["--tiny", "--tokens", "24", "--prompt-tokens", "16",
                                    "--repeats", "1", "--split-rounds", "2", "--dtype", "float32",
                                    "--settings", "off,probes,ranks,both"])
    methods = result["methods"]
    for name, _, _ in bench_real_scale.SETTINGS.values():
        assert methods[name]["accepted_share"] == 1.0
    split = result["split"]["default"]
    assert set(split["stage_ms"]) == {"context", "draft", "select", "verify", "commit"}
    assert 0 <= split["host_ms"] <= split["round_ms"]


def test_real_scale_times_zlab_on_the_same_arrays_with_every_proposal_accepted():
    pytest.importorskip("dflash.model_mlx")
    result = bench_real_scale.main(["--tiny", "--tokens", "20", "--prompt-tokens", "16",
                                    "--repeats", "1", "--split-rounds", "1", "--dtype", "float32",
                                    "--settings", "off", "--zlab"])
    zlab_row = result["methods"][bench_real_scale.ZLAB]
    assert zlab_row["accepted_share"] == 1.0 and zlab_row["round_ms"] > 0


def test_real_scale_zlab_without_the_reference_package_says_so_in_one_line(monkeypatch, capsys):
    for name in ("dflash", "dflash.model_mlx"):  # as if dflash==0.1.0 were not installed
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(SystemExit) as exit:
        bench_real_scale.main(["--tiny", "--zlab"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "--zlab needs Z Lab's reference package" in err
    assert "Traceback" not in err


def test_zlab_twins_hold_the_engine_pairs_arrays_and_decode_its_greedy_text():
    pytest.importorskip("dflash.model_mlx")
    pair = synthetic_pair(TINY, "float32")
    draft = zlab.drafter_twin(pair.drafter)
    ours = dict(tree_flatten(pair.drafter.parameters()))
    theirs = dict(tree_flatten(draft.parameters()))
    for name in ("predecessor_codebook", "successor_codebook"):
        theirs[f"candidate_selector.{name}"] = theirs.pop(f"candidate_selector.{name}.weight")
    assert set(ours) == set(theirs)
    assert all(ours[name] is theirs[name] for name in ours)  # the same arrays, not copies
    prompt = list(range(1, 17))
    decode = zlab.loop(zlab.target_twin(pair.target.model), draft, zlab.bare_ids_tokenizer(), 4)
    tokens, _, rounds = decode(prompt, 20, record=True)
    greedy = mlx_lm_greedy(pair.target.model, set())(prompt, 20)[0]
    assert tokens == greedy and rounds == len(decode.committed) > 0
    # Z Lab's walk over the twin proposes, round by round, what the engine's drafter does
    session = Session(pair, prompt, options=SessionOptions(gamma=4, max_tokens=20, probes=False,
                                                           ranks=False))
    session.prefill()
    records = list(session.run())
    session.close()
    assert len(decode.walks) == len(records) == len(decode.committed)
    assert [len(r.committed_tokens) for r in records] == decode.committed
    assert [list(r.proposals) for r in records] == [w[:r.gamma] for w, r in zip(decode.walks, records)]
    forced, _, _ = decode(prompt, 20, forced=greedy)  # every proposal the target's own token
    assert forced == greedy
    assert zlab.accepted(decode.committed, 4) == (4 * (len(decode.committed) - 1),) * 2


def test_real_scale_runs_each_attention_route_with_fused_projections():
    result = bench_real_scale.main(["--tiny", "--tokens", "16", "--prompt-tokens", "16",
                                    "--repeats", "1", "--split-rounds", "1", "--dtype", "float32",
                                    "--attention", "mlx,kernel", "--projections", "fused"])
    assert result["projections"] == "fused"
    for route in ("mlx", "kernel"):
        assert result["methods"][f"{bench_real_scale.SPEED} [{route}]"]["accepted_share"] == 1.0
        assert result["split"][route]["round_ms"] > 0


def test_real_scale_refuses_an_unknown_route(capsys):
    with pytest.raises(SystemExit) as exit:
        bench_real_scale.main(["--tiny", "--attention", "mlx,flash"])
    assert exit.value.code == 2 and "'mlx,flash': expected attention routes" in capsys.readouterr().err


def test_long_context_keeps_sliding_buffers_flat():
    result = bench_long_context.main(["--tiny", "--contexts", "48,400", "--rounds", "2",
                                      "--window", "16", "--memory-rounds", "60",
                                      "--dtype", "float32", "--attention", "kernel"])
    assert result["attention"] == "kernel"
    memory = result["memory"]
    assert memory["sliding_cache_bytes"][0] == memory["sliding_cache_bytes"][1] > 0
    assert set(result["contexts"]) == {48, 400}


def test_long_context_refuses_an_unknown_attention_route(capsys):
    with pytest.raises(SystemExit) as exit:
        bench_long_context.main(["--tiny", "--attention", "flash"])
    assert exit.value.code == 2 and "invalid choice: 'flash'" in capsys.readouterr().err


def test_round_profile_times_every_piece():
    result = profile_round.main(["--tiny", "--repeats", "1", "--rounds", "2", "--profile-top", "5",
                                 "--dtype", "float32"])
    ms = result["ms"]
    for setting in ("probes off, ranks off", "probes on, ranks on"):
        assert 0 <= ms[f"round, {setting} (host)"] <= ms[f"round, {setting}"]
    assert ms["draft probe buffers"] > 0 and ms["one BlockConv.convolve"] > 0
    assert "function calls" in result["profile"]  # the host profile came back


def test_profile_round_deep_builds_the_real_depths_at_tiny_widths():
    result = profile_round.main(["--deep", "--repeats", "1", "--rounds", "1", "--profile-top", "1",
                                 "--dtype", "float32", "--profiled", "off"])
    assert result["shape"].startswith("llama target: hidden 64, 36 layers")
    assert "DFlash2 5 layers" in result["shape"]


@pytest.mark.skipif(block_attention.available(), reason="checks the refusal off a CUDA GPU")
def test_the_block_attention_bench_says_it_needs_a_gpu(capsys):
    with pytest.raises(SystemExit) as exit:
        bench_block_attention.main([])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "CUDA GPU only" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("layouts, expected", [("9", "LAYOUTS has 8 layouts, 0 to 7"),
                                               ("0,x", "invalid")])
def test_the_block_attention_bench_refuses_a_layout_it_does_not_have(capsys, layouts, expected):
    with pytest.raises(SystemExit) as exit:
        bench_block_attention.main(["--layouts", layouts])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and expected in err and "--layouts" in err


@pytest.mark.slow
def test_the_headless_memory_bench_says_when_a_decode_ends_before_its_first_sample():
    """On the sample, the target's greedy answer to this raw prompt is 10 tokens with its EOS,
    so with any drafter it ends within 10 rounds, before the first sample at round 12: one
    line saying so, not a traceback. (A short answer keeps the test at a few seconds.)"""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_memory_headless.py"
    done = subprocess.run([sys.executable, str(script), "--sample", "--rounds", "14", "--warm-up",
                           "12", "--every", "2", "--prompt", "Say yes."],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "bench_memory_headless: the decode of 'Say yes.' ended before round 12, the first "
        "sample; give a prompt that runs longer")


def test_probe_cost_times_each_setting_and_puts_the_reductions_back():
    before = (probes._moments, probes.ProbeSink.rows, probes.ProbeSink.pending, mx.eval, mx.async_eval)
    result = probe_cost.main(["--tiny", "--rounds", "2", "--repeats", "1", "--dtype", "float32"])
    assert set(result["ms"]) == set(probe_cost.VARIANTS)
    off, on = result["ms"]["probes off"][0], result["ms"]["probes on"][0]
    assert off["rows"] < on["rows"] and on["round"] > 0
    assert (probes._moments, probes.ProbeSink.rows, probes.ProbeSink.pending, mx.eval,
            mx.async_eval) == before


@pytest.mark.parametrize("flag, value", [("--settings", "probes,bogus"), ("--settings", ","),
                                         ("--attention", "nope")])
def test_real_scale_refuses_an_unknown_choice_in_one_line(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_real_scale.main(["--tiny", flag, value])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert repr(value) in error and "comma-separated" in error


def test_target_confidence_reads_the_targets_own_distribution_at_each_answer_token(make_pair, tmp_path):
    import json

    import numpy as np

    from benchmarks import target_confidence
    from dflash_tui.engine.target import load_target

    target_dir, _ = make_pair("llama")
    target = load_target(target_dir)
    ids = [5, 17, 42, 9]
    got = target_confidence.answer_confidence(target.model, ids, set(), max_tokens=6)
    assert len(got) == 6
    # Teacher-force prompt + greedy answer in one forward: the answer's k-th token was chosen
    # from row len(ids) - 1 + k, whose top probability and entropy the bench must report.
    answer = []
    for _ in range(6):
        logits = target.model(mx.array([ids + answer]))[0, -1].astype(mx.float32)
        answer.append(int(mx.argmax(logits)))
    logits = np.array(target.model(mx.array([ids + answer]))[0].astype(mx.float32), dtype=np.float64)
    for k, (p1, entropy) in enumerate(got):
        row = logits[len(ids) - 1 + k]
        p = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
        assert np.isclose(p1, p.max(), rtol=1e-4)
        assert np.isclose(entropy, -(p * np.log(p)).sum(), rtol=1e-3)
    # The validation sample: validation items only, evenly spaced, one folder per kind.
    corpus = tmp_path / "prompts.jsonl"
    rows = [{"text": f"{kind} {split} {i}", "kind": kind, "split": split, "source": "pkg==1.0"}
            for kind in ("real-code", "real-math", "real-prose") for split in ("train", "validation")
            for i in range(10)]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    target_confidence.write_validation(corpus, tmp_path / "set", 3)
    written = {f.parent.name + "/" + f.name: f.read_text().strip()
               for f in sorted((tmp_path / "set").glob("*/*.txt"))}
    assert written["code/01-pkg.txt"] == "real-code validation 0"
    assert [written[f"math/0{n}-pkg.txt"] for n in (1, 2, 3)] == [
        "real-math validation 0", "real-math validation 3", "real-math validation 6"]
    assert len(written) == 9 and not any("train" in text for text in written.values())


def test_target_confidence_refuses_a_missing_prompt_folder_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.target_confidence", "--prompts",
                           str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "nowhere" in done.stderr


@pytest.mark.parametrize("argv, says", [
    (["--write-validation", "DIR", "--corpus", "MISSING.jsonl"], "MISSING.jsonl: unreadable"),
    (["--write-validation", "DIR", "--corpus", "MISSING.jsonl", "--per-kind", "0"],
     "--per-kind 0: expected 1 or more"),
])
def test_target_confidence_refuses_a_bad_validation_request_in_one_line(tmp_path, argv, says):
    argv = [str(tmp_path / a) if a in ("DIR", "MISSING.jsonl") else a for a in argv]
    done = subprocess.run([sys.executable, "-m", "benchmarks.target_confidence", *argv],
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr
    assert not (tmp_path / "DIR").exists()


def test_a_json_result_is_printed_and_written_the_same(tmp_path, capsys):
    """The tail four benchmarks shared (benchmarks/json_out.py): the result printed as
    indented JSON, and the same text (with its newline) written where --json says."""
    import json

    from benchmarks.json_out import print_and_write

    result = {"rounds": 3, "key_to_screen": {"help (?)": [0.1, 0.25]}}
    print_and_write(result, None)
    assert capsys.readouterr().out == json.dumps(result, indent=2) + "\n"
    for path in (tmp_path / "as-str.json", tmp_path / "as-path.json"):
        print_and_write(result, str(path) if path.stem == "as-str" else path)
        assert capsys.readouterr().out == path.read_text() == json.dumps(result, indent=2) + "\n"


@pytest.mark.parametrize("how", [["benchmarks/bench_replay.py"], ["benchmarks/bench_replay_keys.py"],
                                 ["-m", "benchmarks.bench_tab_switch"], ["-m", "benchmarks.bench_tui"]])
def test_the_tui_benchmarks_start_as_their_docstrings_run_them(how):
    """Run as a script or as a module (each as its usage line says), each finds the helper."""
    done = subprocess.run([sys.executable, *how, "--help"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=60)
    assert done.returncode == 0, done.stderr



def test_interleaved_sessions_each_decode_on_their_own_cache(make_pair):
    """bench_engine's sessions take turns on one target: each must step on its own cache,
    which then holds exactly its own committed tokens (all but the anchor), and commit what
    the same session would alone. (They once all stepped on the cache of the last session
    opened, which grew by every session's rounds: a decode none of them was making. The
    fixture's tokens did not show it; the sample's did, from the second round.)"""
    from benchmarks import bench_engine
    from dflash_tui.engine import load_pair

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    pair = load_pair(target_dir, draft_dir)
    base = SessionOptions(gamma=3, max_tokens=10 ** 6, probes=False, ranks=False)
    alone = pair.open(bench_engine.PROMPT, options=base)
    expected = [tuple(alone.step_round().committed_tokens) for _ in range(6)]
    alone.close()

    def step(session):
        tokens = tuple(session.step_round().committed_tokens)
        return tokens, pair.target.offset == len(session.tokens) - 1

    configs = {"off": base, "probes": replace(base, probes=True), "ranks": replace(base, ranks=True)}
    out = bench_engine.interleaved(pair, configs, 4, step)
    assert out == {name: [(t, True) for t in expected[2:]] for name in configs}  # 2 warm-ups


def test_round_paths_times_every_path_on_the_same_rounds(make_pair):
    from benchmarks import bench_round_paths

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    before = (mx.eval, mx.async_eval)
    result = bench_round_paths.main([str(target_dir), "--draft", str(draft_dir), "--rounds", "2",
                                     "--repeats", "1", "--block", "3", "--warm-up", "1",
                                     "--profile", "--profile-top", "3"])
    paths = result["paths"]  # it exits if the paths committed different tokens
    assert list(paths) == [bench_round_paths.BENCH, bench_round_paths.NO_PROBES,
                           bench_round_paths.PROBE, bench_round_paths.TUI]
    for row in paths.values():
        assert 0 < row["mlx_ms"] <= row["round_ms"] and len(row["x_bench"]) == 1
    assert set(result["profile"]) == set(paths)
    assert (mx.eval, mx.async_eval) == before  # the clock's wrappers are gone


def test_quantized_drafter_bench_times_float_kernels_and_dequantized_on_the_same_prompt(make_pair):
    from benchmarks import bench_quantized_drafter

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    result = bench_quantized_drafter.main([str(target_dir), "--draft", str(draft_dir), "--rounds", "2",
                                           "--repeats", "1", "--block", "3"])
    rows = result["drafters"]
    assert list(rows) == ["float", "q8 kernels", "q8 dequantized"]
    assert rows["float"]["ratio_to_float"] == 1.0 and all(r["median_round_ms"] > 0 for r in rows.values())
    assert rows["q8 kernels"]["mean_accepted"] == rows["q8 dequantized"]["mean_accepted"]


def test_quantized_drafter_bench_starts_from_a_drafter_stored_quantized(make_pair, tmp_path):
    """A --draft stored quantized (as the sample may ship) is measured from the float values
    its packed weights hold, as --compare bits=N quantizes it again, not refused."""
    from benchmarks import bench_quantized_drafter

    from dflash_tui.engine.checkpoint import load_drafter, save_drafter
    from dflash_tui.engine.quantize import quantize_drafter

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    packed = load_drafter(draft_dir)
    quantize_drafter(packed, 8)
    save_drafter(packed, tmp_path / "q8")
    result = bench_quantized_drafter.main([str(target_dir), "--draft", str(tmp_path / "q8"), "--bits", "4",
                                           "--rounds", "2", "--repeats", "1", "--block", "3"])
    rows = result["drafters"]
    assert list(rows) == ["float", "q4 kernels", "q4 dequantized"]
    assert rows["q4 kernels"]["mean_accepted"] == rows["q4 dequantized"]["mean_accepted"]
