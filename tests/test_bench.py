"""`dflash-tui bench` on real tiny fixture checkpoints: the tables' numbers are the engine's
own round records, a drafter that cannot miss scores 1.0, a random one ~0, the files agree
with the terminal, and a lossy engine is caught."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from mlx_lm import load as mlx_lm_load
from mlx_lm.generate import generate_step
import mlx.core as mx
from rich.console import Console

from fixtures import target_facts

from dflash_tui.bench.export import to_csv, to_json
from dflash_tui.bench.prompts import load_workloads
from dflash_tui.bench.runner import BenchRunner, Settings
from dflash_tui.bench.tables import print_report
from dflash_tui.cli import main
from dflash_tui.engine.api import load_pair
from dflash_tui.engine.session import Session, SessionOptions
from dflash_tui.engine.target import encode_prompt

PROMPTS = {
    "prose": {"01-fox": "The quick brown fox jumps", "02-rain": "The rain in Spain stays"},
    "code": {"01-add": "def add(a, b):", "02-loop": "for i in range(10):"},
}
MAX_TOKENS = 14


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prompts")
    for workload, prompts in PROMPTS.items():
        (root / workload).mkdir()
        for name, text in prompts.items():
            (root / workload / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def pair(make_pair):
    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    return target_dir, load_pair(target_dir, draft_dir)


def bench(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["bench", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def table_rows(stdout: str, title: str) -> list[list[str]]:
    """The body rows of the table printed under `title` (a rule under its header, then a
    row per workload), as lists of cell strings (no cell holds a space)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rule = next(i for i in range(start, len(lines)) if lines[i].startswith("─"))
    rows = []
    for line in lines[rule + 1:]:
        cells = line.split()
        if not cells or cells[0] not in {*PROMPTS, "all"}:
            break  # the caption
        rows.append(cells)
    return rows


def mlx_lm_greedy(target_dir: Path, ids: list[int], n: int) -> list[int]:
    """The target's greedy text from mlx-lm's own loader and generate loop (independent of
    the engine and of engine/baseline.py)."""
    model, _ = mlx_lm_load(str(target_dir))
    steps = generate_step(mx.array(ids), model, max_tokens=n,
                          sampler=lambda logits: mx.argmax(logits, axis=-1))
    return [int(token) for token, _ in steps]


def partly_right(prompt_len: int, reference: list[int], vocab: int):
    """Proposals whose first k are the target's greedy tokens and the rest wrong, with k a
    fixed function of the position: a drafter with a known, mixed acceptance. Returns the
    proposer and k(tokens, gamma)."""
    def right_prefix(tokens: list[int], gamma: int) -> int:
        return ((len(tokens) - prompt_len) * 7 + 3) % (gamma + 1)

    def propose(tokens: list[int], gamma: int) -> list[int]:
        done = len(tokens) - prompt_len
        k = right_prefix(tokens, gamma)
        right = reference[done:done + gamma] + [0] * gamma
        return [right[i] if i < k else (right[i] + 1) % vocab for i in range(gamma)]
    return propose, right_prefix


def partly_right_proposers(pair, prompts_dir) -> dict:
    """A partly_right proposer per prompt id, from mlx-lm's own greedy decode of it."""
    target_dir, loaded = pair
    target = loaded.target
    proposers = {}
    for workload in load_workloads(prompts_dir):
        for prompt in workload.prompts:
            ids = encode_prompt(target.tokenizer, prompt.text, None)
            proposers[prompt.id] = partly_right(
                len(ids), mlx_lm_greedy(target_dir, ids, MAX_TOKENS + 8), target.vocab_size)[0]
    return proposers


# ---- the numbers are the engine's own records --------------------------------------------

def test_tables_equal_engine_round_records(pair, prompts_dir):
    target_dir, loaded = pair
    target = loaded.target
    blocks = (2, 3, 5)
    references, proposers = {}, {}
    for workload in load_workloads(prompts_dir):
        for prompt in workload.prompts:
            ids = encode_prompt(target.tokenizer, prompt.text, None)
            references[prompt.id] = mlx_lm_greedy(target_dir, ids, MAX_TOKENS + 8)
            proposers[prompt.id] = partly_right(len(ids), references[prompt.id], target.vocab_size)

    settings = Settings(blocks=blocks, max_tokens=MAX_TOKENS)
    result = BenchRunner(loaded, load_workloads(prompts_dir), settings,
                         proposer_for=lambda p, ids, ref: proposers[p.id][0]).run()
    assert result.lossless is True
    cells = {(c.workload, c.block): c for c in result.cells()}

    # The same prompts, stepped here by hand, one Session each; numbers computed from the
    # RoundRecords with nothing from dflash_tui.bench.
    pooled: dict[tuple[str, int], list] = {}
    generated: dict[tuple[str, int], list[int]] = {}
    for workload in load_workloads(prompts_dir):
        for prompt in workload.prompts:
            propose, expected_k = proposers[prompt.id]
            for block in blocks:
                session = loaded.open(prompt.text, options=SessionOptions(
                    gamma=block, max_tokens=MAX_TOKENS, probes=False, proposer=propose))
                records = []
                while session.finished is None:
                    tokens_before = list(session.tokens)
                    record = session.step_round()
                    # the target's greedy verify accepts exactly the right prefix
                    assert record.accepted == expected_k(tokens_before, record.gamma)
                    records.append(record)
                assert session.generated == references[prompt.id][:MAX_TOKENS]
                session.close()
                for key in ((workload.name, block), ("all", block)):
                    pooled.setdefault(key, []).extend(records)
                    generated.setdefault(key, []).append(len(session.generated))

    assert set(pooled) == set(cells)
    for key, records in pooled.items():
        c = cells[key]
        n = len(records)
        assert c.rounds == n
        # the speed columns' token counts: every prompt's generated tokens, the first of
        # which the prefill gives, the rest the rounds commit; the target alone decodes as many
        assert (c.prompts, c.tokens) == (len(generated[key]), sum(generated[key]))
        assert c.decode_tokens == sum(len(r.committed_tokens) for r in records) == c.tokens - c.prompts
        assert c.target_decode_tokens == c.decode_tokens and c.tokens_per_round == c.decode_tokens / n
        assert c.accepted == sum(r.accepted for r in records)
        assert c.mean_accepted == sum(r.accepted for r in records) / n
        assert c.tau == c.mean_accepted + 1
        assert c.rollback_rate == sum(1 for r in records if r.accepted < r.gamma) / n
        assert 0 < c.mean_accepted < key[1]  # the mixed drafter: neither all nor nothing
        for i, p in enumerate(c.positions, start=1):
            proposed = [r for r in records if r.gamma >= i]
            assert p.proposed == len(proposed)
            assert p.acceptance == sum(1 for r in proposed if r.accepted >= i) / len(proposed)
            eligible = [r for r in proposed if r.accepted >= i - 1]
            assert p.conditional == sum(1 for r in eligible if r.accepted >= i) / len(eligible)


def test_json_csv_and_terminal_tables_agree(pair, prompts_dir):
    target_dir, loaded = pair
    blocks = (2, 4)
    proposers = partly_right_proposers(pair, prompts_dir)
    result = BenchRunner(loaded, load_workloads(prompts_dir),
                         Settings(blocks=blocks, max_tokens=MAX_TOKENS),
                         proposer_for=lambda p, ids, ref: proposers[p.id]).run()
    screen = io.StringIO()
    print_report(Console(file=screen, width=200), result)
    stdout = screen.getvalue()
    data = json.loads(json.dumps(to_json(result)))  # through the text, as a reader gets it
    rows = list(csv.DictReader(io.StringIO(to_csv(result))))

    cells = {(c["workload"], c["block"]): c for c in data["cells"]}
    assert [(r["workload"], int(r["block"])) for r in rows] == list(cells)
    for row in rows:
        c = cells[(row["workload"], int(row["block"]))]
        for field in ("rounds", "tokens", "accepted", "rollbacks", "prompts"):
            assert int(row[field]) == c[field]
        for field in ("mean_accepted", "tau", "rollback_rate", "alpha_min", "alpha_max"):
            assert float(row[field]) == c[field]
        for p in c["per_position"]:
            assert float(row[f"accept_at_{p['position']}"]) == p["acceptance"]
        assert float(row["speedup"]) == c["speed"]["speedup"]

    accepted = {r[0]: r for r in table_rows(stdout, "Accepted proposals per round")}
    rollback = {r[0]: r for r in table_rows(stdout, "Rollback rate")}
    by_position = {(r[0], int(r[1])): r for r in table_rows(stdout, "Acceptance by position")}
    speed = {(r[0], int(r[1])): r for r in table_rows(stdout, "Speed")}
    assert set(accepted) == {"prose", "code", "all"}
    for (workload, block), c in cells.items():
        column = 2 + blocks.index(block)
        assert accepted[workload][column] == f"{c['mean_accepted']:.2f}"
        assert rollback[workload][1 + blocks.index(block)] == f"{100 * c['rollback_rate']:.1f}%"
        row = by_position[(workload, block)]
        assert row[2:5] == [str(c["rounds"]), str(c["tokens"]), f"{c['tau']:.2f}"]
        assert row[5:5 + block] == [f"{p['acceptance']:.2f}" for p in c["per_position"]]
        assert speed[(workload, block)][4] == f"{c['speed']['speedup']:.2f}x"
    widest = cells[("all", max(blocks))]
    assert accepted["all"][1] == f"{widest['alpha_min']:.2f}-{widest['alpha_max']:.2f}"


# ---- through the command line ------------------------------------------------------------

def test_drafter_that_cannot_miss_scores_one(make_pair, prompts_dir, tmp_path, capsys):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    out_json, out_csv = tmp_path / "b.json", tmp_path / "b.csv"
    rc, stdout, _ = bench(capsys, target_dir, "--prompts", prompts_dir, "--blocks", "2,4,7",
                          "--max-tokens", MAX_TOKENS, "--oracle", "--json", out_json,
                          "--csv", out_csv)
    assert rc == 0
    data = json.loads(out_json.read_text())
    assert all(t["finish_reason"] == "length" for t in data["target_alone"])  # no EOS to pad past
    for c in data["cells"]:
        assert c["rollback_rate"] == 0.0 and c["rollbacks"] == 0
        assert [p["acceptance"] for p in c["per_position"]] == [1.0] * c["block"]
        assert c["alpha_min"] == c["alpha_max"] == 1.0
    for run in data["runs"]:  # every round accepts all it proposed (short ones at the end)
        assert run["accepted_per_round"] == run["gamma_per_round"]
    assert all(float(r["rollback_rate"]) == 0.0 for r in csv.DictReader(out_csv.open()))
    assert [r[1:] for r in table_rows(stdout, "Rollback rate")] == [["0.0%"] * 3] * 3
    assert "lossless: all 12 speculative decodes" in stdout


@pytest.mark.parametrize("target,drafter", [("llama", "DFlash2DraftModel"),
                                            ("qwen35", "DFlashDraftModel")])
def test_random_drafter_scores_near_zero(make_pair, prompts_dir, tmp_path, capsys, target, drafter):
    target_dir, _ = make_pair(target, drafter)
    out_json, out_csv = tmp_path / "b.json", tmp_path / "b.csv"
    rc, stdout, _ = bench(capsys, target_dir, "--prompts", prompts_dir, "--blocks", "2,4",
                          "--max-tokens", MAX_TOKENS, "--json", out_json, "--csv", out_csv)
    assert rc == 0
    data = json.loads(out_json.read_text())
    assert data["lossless"] is True and data["complete"] is True
    for c in data["cells"]:
        # the cell pools the file's own per-prompt runs of its workload ("all": every one)
        pooled = lambda workload: c["workload"] in (workload, "all")  # noqa: E731
        runs = [r for r in data["runs"] if r["block"] == c["block"] and pooled(r["workload"])]
        assert c["prompts"] == len(runs) == sum(len(p) for w, p in PROMPTS.items() if pooled(w))
        assert (c["rounds"], c["tokens"]) == (sum(r["rounds"] for r in runs),
                                              sum(r["tokens"] for r in runs))
        assert c["accepted"] == sum(sum(r["accepted_per_round"]) for r in runs)
        assert c["rounds"] > 0 and c["mean_accepted"] == c["accepted"] / c["rounds"]
        assert c["mean_accepted"] <= 0.1
        assert c["rollback_rate"] >= 0.9
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == len(data["cells"]) == 3 * 2
    assert [float(r["mean_accepted"]) for r in rows] == [c["mean_accepted"] for c in data["cells"]]


def test_deterministic_columns_reproduce(make_pair, prompts_dir, tmp_path, capsys):
    """Two runs, same everything: every count-based number identical; at temperature > 0
    too, since the engine's sampling is seeded."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    for temperature in ("0", "0.9"):
        runs = []
        for n in range(2):
            path = tmp_path / f"t{temperature}-{n}.json"
            rc, _, _ = bench(capsys, target_dir, "--prompts", prompts_dir, "--blocks", "2,4",
                             "--max-tokens", MAX_TOKENS, "--temperature", temperature,
                             "--seed", 3, "--json", path)
            assert rc == 0
            data = json.loads(path.read_text())
            runs.append(([{k: v for k, v in c.items() if k != "speed"} for c in data["cells"]],
                         [{k: v for k, v in r.items() if k != "speed"} for r in data["runs"]]))
        assert runs[0] == runs[1]


def test_temperature_above_zero_is_not_checked(make_pair, prompts_dir, tmp_path, capsys):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    path = tmp_path / "t.json"
    rc, stdout, _ = bench(capsys, target_dir, "--prompts", prompts_dir, "--blocks", "3",
                          "--max-tokens", 8, "--temperature", "0.7", "--json", path)
    assert rc == 0
    data = json.loads(path.read_text())
    assert data["lossless"] is None
    assert all(r["lossless"] is None for r in data["runs"])
    assert "losslessness not checked" in stdout


def test_lossy_engine_is_caught(make_pair, prompts_dir, tmp_path, capsys, monkeypatch):
    """Make the engine commit a wrong token at generated index 4: the bench must name that
    position, the target's margin there, and exit 1."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    vocab = target_facts(target_dir)["vocab"]
    wrong_at = 4
    commit = Session._commit

    def lossy_commit(self, *stage_inputs):
        fields = commit(self, *stage_inputs)
        at = len(self.prompt_ids) + wrong_at
        if len(self.tokens) > at and not getattr(self, "_made_lossy", False):
            self.tokens[at] = (self.tokens[at] + 1) % self.target.vocab_size
            self._made_lossy = True
        return fields

    monkeypatch.setattr(Session, "_commit", lossy_commit)
    path = tmp_path / "lossy.json"
    rc, stdout, _ = bench(capsys, target_dir, "--prompts", prompts_dir, "--blocks", "2,4",
                          "--max-tokens", MAX_TOKENS, "--json", path)
    assert rc == 1
    assert "NOT LOSSLESS: 8 of 8 speculative decodes diverged" in stdout
    data = json.loads(path.read_text())
    assert data["lossless"] is False
    assert all(c["diverged"] == c["prompts"] for c in data["cells"])
    for run in data["runs"]:
        d = run["divergence"]
        assert run["lossless"] is False
        assert d["index"] == wrong_at
        assert d["candidate"] == (d["reference"] + 1) % vocab
        assert d["target_top"]["top1"] == d["reference"]  # the target's own choice there
        assert d["margin"] > 0 and math.isfinite(d["margin"])
        assert d["candidate_logit"] < d["target_top"]["top1_logit"]
        line = f"{run['prompt']} block {run['block']}: first difference at generated token {wrong_at}"
        assert line in stdout


# ---- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("args,expected", [
    (["--blocks", "2,x"], "--blocks '2,x': expected comma-separated"),
    (["--blocks", "0,4"], "--blocks '0,4'"),
    (["--max-tokens", "0"], "--max-tokens 0: expected at least 1"),
    (["--limit", "0"], "--limit 0"),
    (["--temperature", "-1"], "--temperature -1: expected"),  # as typed, not -1.0
    (["--oracle", "--temperature", "0.5"], "--oracle"),
    (["--prompts", "{tmp}/nowhere"], "nowhere: no such directory"),
    (["--prompts", "{tmp}/empty-workload"], "empty-workload/code: workload folder has no *.txt"),
    (["--prompts", "{tmp}/empty-prompt"], "empty-prompt/math/01.txt: empty prompt file"),
    (["--prompts", "{tmp}/no-workloads"], "no workload sub-folders"),
    (["--json", "{tmp}/missing/out.json"], "missing/out.json: directory"),
    (["--csv", "{tmp}"], "is a directory"),
    (["--json", "{tmp}/same.json", "--csv", "{tmp}/same.json"], "--csv {tmp}/same.json: same file as --json"),
    (["--json", "{tmp}/same.json", "--csv", "{tmp}/sub/../same.json"], "same file as --json"),
    (["--prompts", "{tmp}/dangling"], "dangling/code/b.txt: broken symbolic link to {tmp}/gone.txt"),
    (["--prompts", "{tmp}/folder-prompt"], "folder-prompt/code/b.txt: a folder, not a prompt file"),
])
def test_bad_input_is_one_line_and_exit_2(make_pair, prompts_dir, tmp_path, capsys, args, expected):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    (tmp_path / "empty-workload" / "code").mkdir(parents=True)
    (tmp_path / "empty-prompt" / "math").mkdir(parents=True)
    (tmp_path / "empty-prompt" / "math" / "01.txt").write_text("  \n")
    (tmp_path / "no-workloads").mkdir()
    (tmp_path / "sub").mkdir()
    for name in ("dangling", "folder-prompt"):  # a good a.txt beside a b.txt that is no file
        (tmp_path / name / "code").mkdir(parents=True)
        (tmp_path / name / "code" / "a.txt").write_text("def add(a, b):\n")
    (tmp_path / "dangling" / "code" / "b.txt").symlink_to(tmp_path / "gone.txt")
    (tmp_path / "folder-prompt" / "code" / "b.txt").mkdir()
    expected = expected.replace("{tmp}", str(tmp_path))
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--prompts" not in args:
        args += ["--prompts", str(prompts_dir)]
    rc, stdout, stderr = bench(capsys, target_dir, *args)
    assert rc == 2
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dflash-tui: error: ")
    assert expected in lines[0]


@pytest.mark.parametrize("flag", ["--json", "--csv"])
def test_an_output_that_is_a_prompt_file_is_refused_before_loading(make_pair, prompts_dir, tmp_path,
                                                                   capsys, flag):
    import shutil

    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    prompts = tmp_path / "prompts"
    shutil.copytree(prompts_dir, prompts)
    victim = prompts / "code" / "01-add.txt"
    before = victim.read_bytes()
    rc, stdout, stderr = bench(capsys, target_dir, "--prompts", prompts, flag, victim)
    assert rc == 2 and stdout == ""
    [line] = stderr.strip().splitlines()
    assert line.startswith(f"dflash-tui: error: {flag} {victim}: is the prompt file {victim}")
    assert "loading" not in stderr
    assert victim.read_bytes() == before


def _stepped_by_hand(loaded, prompts_dir, blocks, proposers) -> dict[tuple[str, int], list]:
    """Each workload's (and "all"'s) records per block, every prompt's session stepped here
    with the proposers the bench was given."""
    pooled: dict[tuple[str, int], list] = {}
    for workload in load_workloads(prompts_dir):
        for prompt in workload.prompts:
            for block in blocks:
                session = loaded.open(prompt.text, options=SessionOptions(
                    gamma=block, max_tokens=MAX_TOKENS, probes=False, proposer=proposers[prompt.id]))
                records = list(session.run())
                session.close()
                for key in ((workload.name, block), ("all", block)):
                    pooled.setdefault(key, []).extend(records)
    return pooled


def test_slots_tabulate_every_slot_as_the_records_say(pair, prompts_dir, tmp_path, capsys):
    """--slots: per workload and block, each slot's counts are those of the records of the
    same sessions stepped by hand (ranks on), computed here without dflash_tui's aggregates;
    the CLI prints the table and writes it to JSON."""
    import statistics

    from dflash_tui.bench.slots import stats_of

    target_dir, loaded = pair
    blocks = (2, 4)
    proposers = partly_right_proposers(pair, prompts_dir)
    result = BenchRunner(loaded, load_workloads(prompts_dir),
                         Settings(blocks=blocks, max_tokens=MAX_TOKENS, slots=True),
                         proposer_for=lambda p, ids, ref: proposers[p.id]).run()
    got = {(w, b): slots for w, b, slots in stats_of(result)}

    pooled = _stepped_by_hand(loaded, prompts_dir, blocks, proposers)
    assert set(got) == set(pooled)
    for key, records in pooled.items():
        assert len(got[key]) == key[1]
        for s in got[key]:
            proposed = [r for r in records if r.gamma > s.slot]
            reached = [r for r in proposed if r.accepted >= s.slot]
            ranks = [r.ranks[s.slot].rank for r in reached]
            assert (s.proposed, s.accepted, s.reached) == (
                len(proposed), sum(r.accepted > s.slot for r in proposed), len(reached)), key
            assert (s.rank0, s.ranked) == (ranks.count(0), len(ranks)), key
            assert s.rank_mean == (statistics.mean(ranks) if ranks else None)
            off = [r for r in ranks if r > 0]
            assert s.off_rank_median == (statistics.median(off) if off else None)
            assert s.in_k == sum(bool(r.ranks[s.slot].in_candidates) for r in proposed)
            missed = [r.ranks[s.slot] for r in reached if r.ranks[s.slot].rank > 0]
            assert (s.off_ranked, s.off_second, s.off_top5, s.off_in_k, s.off_in_k_known) == (
                len(missed), sum(k.rank == 1 for k in missed), sum(k.rank <= 4 for k in missed),
                sum(bool(k.in_candidates) for k in missed),
                sum(k.in_candidates is not None for k in missed)), key
    assert any(0 < s.accepted < s.proposed for slots in got.values() for s in slots)

    out = tmp_path / "slots.json"
    rc, stdout, _ = bench(capsys, target_dir, "--prompts", prompts_dir, "--blocks", "2",
                          "--max-tokens", "6", "--slots", "--json", out)
    assert rc == 0 and "Per slot, over every round of each workload" in stdout
    written = json.loads(out.read_text())
    assert written["settings"]["slots"] is True and "--slots" in written["command"]
    assert [(c["workload"], c["block"]) for c in written["slots"]] == [
        ("prose", 2), ("code", 2), ("all", 2)]
    slot0 = written["slots"][-1]["slots"][0]
    assert slot0["proposed"] == sum(len(r["accepted_per_round"]) for r in written["runs"])
    # per cell, where the argmax missed: the counts and their shares
    assert slot0["off_ranked"] > 0 and slot0["off_in_k_known"] == slot0["off_ranked"]
    assert slot0["off_in_k_rate"] == slot0["off_in_k"] / slot0["off_in_k_known"]
    assert slot0["off_beyond_k_rate"] == 1 - slot0["off_in_k_rate"] and slot0["top_k"] > 0
    assert "block 2, argmax missed (K = " in stdout


@pytest.mark.parametrize("workload", ["prose", "real-problem"])
def test_the_slot_table_fits_80_columns_uncut(workload):
    """Tab 4's thirteen columns after the workload, at their widest (a mean of 1e+05,
    five-digit counts) fit 80 columns, no number cut; a workload name longer than its
    header folds onto a second line rather than push them past 80."""
    from dflash_tui.aggregates import SlotStats
    from dflash_tui.bench.slots import SLOT_HEADER, slot_table

    wide = SlotStats(slot=15, proposed=99_999, accepted=99_999, reached=99_999, rank0=99_999,
                     ranked=99_999, rank_mean=123_456.0, rank_median=0.0, in_k=99_999,
                     in_k_known=99_999, left=99_999, helped=9_999, hurt=9_999, neutral=9_999,
                     missed=1, torn=1, off_rank_median=123_456.0)
    console = Console(width=80, record=True)
    console.print(slot_table([(workload, 7, [wide])], 7))
    text = console.export_text()
    assert "…" not in text and " ".join(SLOT_HEADER) in " ".join(text.split())
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    body = [line.split() for line in text.split("─")[-1].strip("\n").splitlines()]
    assert body[0][1:] == ["15", "100%", "99999", "100%", "100%", "1e+05", "1e+05", "100%",
                           "100%", "99999", "9999", "9999", "9999"]
    assert "".join(line[0] for line in body) == workload  # folded, not cut


def test_the_near_miss_table_gives_cumulative_shares_of_the_misses_in_80_columns():
    """Where the argmax missed: of 10 misses, 4 ranked 2nd and 7 in the top 5; 9 of them
    were among the K = 16 candidates, 1 beyond; the table fits 80 columns uncut."""
    from dflash_tui.aggregates import SlotStats
    from dflash_tui.bench.slots import near_rows, near_table

    s = SlotStats(slot=15, proposed=99_999, accepted=9, reached=99_999, rank0=9, ranked=19,
                  rank_mean=2.0, rank_median=1.0, in_k=9, in_k_known=19, left=0, helped=0,
                  hurt=0, neutral=0, off_ranked=10, off_second=4, off_top5=7, off_in_k=9,
                  off_in_k_known=10, top_k=16)
    assert near_rows([("real-problem", 7, [s])], 7) == [
        ["real-problem", "15", "10", "40%", "70%", "90%", "10%"]]
    console = Console(width=80, record=True)
    console.print(near_table([("real-problem", 7, [s])], 7))
    text = console.export_text()
    assert "argmax missed (K = 16)" in text and "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80


def test_torn_is_said_to_be_of_the_rejected_slots_it_counts():
    """`torn` is a share of the reached slots the target rejected (acc's misses), and `miss`
    counts the reached slots whose argmax was wrong: with a selector they differ. Here 3 slots
    reached, 1 accepted, the argmax right on 2 (the walk hurt once): torn reads 50% (1 of the
    2 rejected) beside a `miss` of 1, which the caption and the TUI's legend, saying "torn =
    of the misses" right after defining miss, made read as an impossible 1 of 1 at 50%."""
    import re

    from dflash_tui.aggregates import SlotStats
    from dflash_tui.bench.slots import CAPTION, SLOT_HEADER, near_rows, slot_rows
    from dflash_tui.panels.aggregates import slot_legend

    s = SlotStats(slot=0, proposed=3, accepted=1, reached=3, rank0=2, ranked=3, rank_mean=1.0,
                  rank_median=0.0, in_k=3, in_k_known=3, left=1, helped=0, hurt=1, neutral=0,
                  missed=2, torn=1, off_rank_median=3.0, off_ranked=1, off_in_k=1,
                  off_in_k_known=1, top_k=16)
    assert slot_rows([("prose", 7, [s])], 7)[0][SLOT_HEADER.index("torn")] == "50%"
    assert near_rows([("prose", 7, [s])], 7)[0][2] == "1"  # miss: the argmax's one
    for text in (CAPTION, slot_legend().plain):
        torn = re.search(r"\btorn ?[:=] ([^;\n]*)", text).group(1)
        assert torn.startswith("of the reached slots rejected"), torn


def test_the_slot_table_writes_a_median_rank_as_the_aggregates_tab_does():
    """One formatting for both (dflash_tui/slot_text.py): 1587.5 is 1588 and 123456 is
    1e+05 in either, where the bench wrote 1587.5 and 123456."""
    from dflash_tui.aggregates import SlotStats
    from dflash_tui.bench.slots import SLOT_HEADER, slot_rows
    from dflash_tui.slot_text import off_rank

    medians = (2.5, 1587.5, 123456.0, None)
    stats = [SlotStats(slot=i, proposed=9, accepted=1, reached=9, rank0=1, ranked=9,
                       rank_mean=1.0, rank_median=1.0, in_k=9, in_k_known=9, left=0,
                       helped=0, hurt=0, neutral=0, missed=8, torn=0, off_rank_median=m)
             for i, m in enumerate(medians)]
    shown = [row[SLOT_HEADER.index("off")] for row in slot_rows([("prose", 7, stats)], 7)]
    assert shown == ["2.5", "1588", "1e+05", "-"]
    assert shown[:3] == [off_rank(m) for m in medians[:3]]


def test_slots_tally_only_prompts_that_finished_every_block(pair, prompts_dir):
    """An interrupted bench reports the prompts that finished every block: so do its slots."""
    from dflash_tui.bench.slots import SlotTally

    _, loaded = pair
    session = loaded.open("The quick brown fox", options=SessionOptions(gamma=2, max_tokens=6))
    records = list(session.run())
    session.close()
    tally = SlotTally(blocks=2)
    tally.add_run("prose/01", "prose", 2, records)
    assert tally.stats(["prose"], [2, 4]) == []  # block 4 not run yet (ctrl-c)
    tally.add_run("prose/01", "prose", 4, records)
    assert [(w, b) for w, b, _ in tally.stats(["prose"], [2, 4])] == [("prose", 2), ("prose", 4)]


@pytest.mark.parametrize("flag", [["--slots"], ["--compare", "dtype=float16"]])
def test_the_oracle_has_no_drafter_to_measure(pair, prompts_dir, capsys, flag):
    target_dir, _ = pair
    rc, _, err = bench(capsys, target_dir, "--prompts", prompts_dir, "--oracle", *flag)
    assert rc == 2 and f"{flag[0]} with --oracle" in err and "Traceback" not in err


def test_slots_with_compare_tabulate_the_references_slots_too(make_pair, prompts_dir,
                                                              fixture_root, tmp_path, capsys):
    """--compare --slots: the reference's per-slot numbers, counted by the drafter's own code
    from the reference's side of the same rounds, equal counts computed here (without
    dflash_tui's aggregates) from the reference records of the same sessions stepped by hand;
    the CLI prints both tables and says the speed includes the reference, the JSON holds both."""
    import statistics

    from fixtures import write_drafter

    from dflash_tui.aggregates import TORN
    from dflash_tui.bench.slots import stats_of

    target_dir, draft_dir = make_pair("llama", "DFlash2DraftModel")
    config = json.loads((draft_dir / "config.json").read_text())
    other = write_drafter(fixture_root / "bench-slots-reference", config, seed=7)
    loaded = load_pair(target_dir, draft_dir, compare=str(other))
    proposers = partly_right_proposers((target_dir, loaded), prompts_dir)
    # the reference proposes right up to a slot of its own, so each side reaches further in
    # some rounds (a second verify included); matched to its prompt by the prompt's tokens
    truths = []
    for workload in load_workloads(prompts_dir):
        for prompt in workload.prompts:
            ids = encode_prompt(loaded.target.tokenizer, prompt.text, None)
            truths.append((ids, mlx_lm_greedy(target_dir, ids, MAX_TOKENS + 8)))

    def reference_proposer(tokens: list[int], gamma: int) -> list[int]:
        ids, truth = next((i, t) for i, t in truths if tokens[:len(i)] == i)
        done = len(tokens) - len(ids)
        k = (done * 5 + 1) % (gamma + 1)
        right = truth[done:done + gamma] + [0] * gamma
        return [right[i] if i < k else (right[i] + 1) % loaded.target.vocab_size
                for i in range(gamma)]

    loaded.reference.proposer = reference_proposer
    blocks = (2, 4)
    result = BenchRunner(loaded, load_workloads(prompts_dir),
                         Settings(blocks=blocks, max_tokens=MAX_TOKENS, slots=True),
                         proposer_for=lambda p, ids, ref: proposers[p.id]).run()
    got = {(w, b): slots for w, b, slots in stats_of(result, reference=True)}

    pooled = _stepped_by_hand(loaded, prompts_dir, blocks, proposers)
    assert set(got) == set(pooled)
    deeper = 0
    for key, records in pooled.items():
        assert len(got[key]) == key[1]
        for s in got[key]:
            n = s.slot
            rounds = [r.compare for r in records if r.gamma > n]
            reached = [c for c in rounds if c.accepted >= n]
            ranks = [c.ranks[n] for c in reached]
            left = [c for c in reached if c.left_argmax[n]]
            assert (s.proposed, s.accepted, s.reached) == (
                len(rounds), sum(c.accepted > n for c in rounds), len(reached)), key
            assert (s.rank0, s.ranked) == (ranks.count(0), len(ranks)), key
            assert s.rank_mean == (statistics.mean(ranks) if ranks else None)
            off = [k for k in ranks if k > 0]
            assert s.off_rank_median == (statistics.median(off) if off else None)
            assert s.in_k == sum(bool(c.in_candidates[n]) for c in rounds)
            assert s.left == sum(c.left_argmax[n] for c in rounds)
            assert s.helped == sum(c.proposals[n] == c.targets[n] != c.argmax[n] for c in left)
            assert s.hurt == sum(c.argmax[n] == c.targets[n] != c.proposals[n] for c in left)
            # torn: the target's own top probability is the drafter's verify row's, where the
            # reference's prefix is the drafter's (the same row)
            missed = [r.ranks[n].target_top[0].prob for r in records
                      if r.gamma > n and r.compare.accepted == n
                      and r.compare.proposals[:n] == r.proposals[:n]]
            assert (s.missed, s.torn) == (len(missed), sum(p < TORN for p in missed)), key
        deeper += sum(r.compare.accepted > r.accepted for r in records)
    assert deeper and any(0 < s.accepted < s.proposed for slots in got.values() for s in slots)
    # the drafter's own table is the drafter's, not the reference's
    assert stats_of(result) != stats_of(result, reference=True)

    out = tmp_path / "slots.json"
    rc, stdout, _ = bench(capsys, target_dir, "--prompts", prompts_dir, "--blocks", "2",
                          "--max-tokens", "6", "--limit", "1", "--slots", "--compare", other,
                          "--json", out)
    assert rc == 0
    assert "Per slot, over every round of each workload  [deterministic]" in stdout
    assert (f"Per slot, over every round of each workload, reference {other} on the same "
            "committed stream  [deterministic]") in stdout
    assert ("Speed  [wall clock on this machine: varies from run to run]  (includes the "
            "reference's work (--compare) and the ranks --slots computes)") in stdout
    written = json.loads(out.read_text())
    assert [(c["workload"], c["block"]) for c in written["compare"]["slots"]] == [
        ("prose", 2), ("code", 2), ("all", 2)]
    assert all(c["speed"]["compare_ms_per_round"] > 0 for c in written["cells"])


def test_a_drafter_gone_nan_is_named_in_the_text_json_and_csv(nan_pair, prompts_dir, tmp_path,
                                                               capsys):
    """The bench runs with probes off: non-finite logits were shown only as 0.00 accepted."""
    target_dir, draft_dir = nan_pair
    out_json, out_csv = tmp_path / "b.json", tmp_path / "b.csv"
    rc, stdout, _ = bench(capsys, target_dir, "--draft", draft_dir, "--prompts", prompts_dir,
                          "--blocks", "2", "--max-tokens", 6, "--limit", 1,
                          "--json", out_json, "--csv", out_csv)
    assert rc == 0
    data = json.loads(out_json.read_text())
    for run in data["runs"]:
        assert run["nonfinite_logit_slots_per_round"] == run["gamma_per_round"]
        assert run["nonfinite_logit_rounds"] == run["rounds"] > 0
    cells = {c["workload"]: c for c in data["cells"]}
    assert all(c["nonfinite_logit_rounds"] == c["rounds"] for c in cells.values())
    rows = {r["workload"]: r for r in csv.DictReader(out_csv.open())}
    assert int(rows["all"]["nonfinite_logit_rounds"]) == cells["all"]["rounds"]
    prose, code, total = cells["prose"]["rounds"], cells["code"]["rounds"], cells["all"]["rounds"]
    line = " ".join(stdout.split())  # rich wraps the line at the console's width
    assert (f"DRAFTER LOGITS NaN/Inf in {total} of {total} rounds "
            f"(prose block 2: {prose} of {prose}, code block 2: {code} of {code}): ") in line


def test_a_healthy_drafter_says_nothing_of_nonfinite_logits(pair, prompts_dir, capsys):
    target_dir, _ = pair
    rc, stdout, _ = bench(capsys, target_dir, "--prompts", prompts_dir, "--blocks", "2",
                          "--max-tokens", 6, "--limit", 1)
    assert rc == 0 and "non-finite" not in stdout


def test_slots_show_a_slot_whose_logits_went_nonfinite_as_nonfinite(
        fp16_overflow_pair, nan_pair, prompts_dir, tmp_path, capsys):
    """--slots: where a side's logits held NaN / Inf (a float16 reference that overflowed,
    a drafter with a NaN weight), its rank is no rank: rank_of puts the target's token last,
    so the reference's `off` read 319 (the fixture vocabulary - 1) beside argmax 0%, as if
    the true token had really ranked last. Its argmax, off and in K cells and its
    argmax-missed row read n/f, the JSON counts those slots and leaves them out of the
    rank counts; the side whose logits were finite keeps its numbers."""
    def per_slot(stdout: str, side: str) -> tuple[list, list]:
        part = stdout.split(f"Per slot, over every round of each workload{side}")[1]
        return table_rows(part, "block 2 "), table_rows(part, "block 2, argmax missed")

    target_dir, overflow_dir = fp16_overflow_pair
    out = tmp_path / "overflow.json"
    rc, stdout, _ = bench(capsys, target_dir, "--draft", overflow_dir, "--prompts", prompts_dir,
                          "--blocks", "2", "--max-tokens", "6", "--slots",
                          "--compare", "dtype=float16", "--json", out)
    assert rc == 0
    slots, near = per_slot(stdout, ", reference dtype=float16")
    slot0 = [row for row in slots if row[1] == "0"]
    assert slot0 and all(row[5:9] == ["n/f"] * 4 for row in slot0), slot0  # argmax mean off in K
    assert all(row[2:] == ["n/f"] * 5 for row in near if row[1] == "0"), near
    # in K counts every proposed slot, not the reached ones alone: so does its n/f
    assert ("n/f = the slot's logits held a NaN or Inf in every round the cell counts "
            "(argmax, mean, off: the reached ones; in K: every proposed one)") in " ".join(stdout.split())
    mine, _ = per_slot(stdout, "  [")  # the drafter's own table: float32 holds 1e5
    assert not any("n/f" in row for row in mine)
    written = json.loads(out.read_text())
    for cell in written["compare"]["slots"]:
        s = cell["slots"][0]
        assert s["nonfinite"] == s["proposed"] > 0 and s["nonfinite_reached"] == s["reached"]
        assert (s["ranked"], s["off_rank_median"], s["in_k_known"]) == (0, None, 0)
    assert all(s["nonfinite"] == 0 for c in written["slots"] for s in c["slots"])

    _, nan_dir = nan_pair  # the drafter's own NaN logits: its table reads the same
    rc, stdout, _ = bench(capsys, target_dir, "--draft", nan_dir, "--prompts", prompts_dir,
                          "--blocks", "2", "--max-tokens", "6", "--slots")
    assert rc == 0
    slots, _ = per_slot(stdout, "  [")
    assert all(row[5:9] == ["n/f"] * 4 for row in slots if row[1] == "0"), slots
