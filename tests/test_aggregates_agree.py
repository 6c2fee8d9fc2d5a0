"""The whole-decode answers (tab 4's per-slot numbers, the rounds and their accepted counts)
agree wherever the tool gives them for the same decode: the live app, replay, `export`,
of the same rounds of the fixture pair however they were recorded."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from dflash_tui import aggregates
from dflash_tui.app.live import LiveApp
from dflash_tui.app.reading_pass import ReadingPass
from dflash_tui.app.replay import open_recording
from dflash_tui.bench.slots import to_json
from dflash_tui.cli import main
from dflash_tui.tables import load_trace

from app_helpers import SIZE, launch, oracle_proposer, press_and_settle, run, wait_for, wait_loaded

STAGES = 5  # context, draft, select, verify, commit


def whole_decode(history) -> tuple:
    """What tab 4 counts over every round of a history."""
    span = aggregates.every_round(history)
    return (history.round.values.tolist(), aggregates.mean_accepted(history, span),
            aggregates.slot_stats(history, span))


def test_a_folder_of_x_exports_counts_each_round_once_as_the_live_app_did(pair, tmp_path):
    """`x` at every stage of three rounds (twice at one commit), then at round 3's draft:
    replayed, the folder of those snapshots is the three completed rounds the live app
    counted, and `export` writes each round once. Each export used to be a round of its
    own: round 0 counted six times, its context, draft and select exports as rounds that
    accepted nothing (tab 4: `rounds 0–3 (17 of 17)`, mean accepted 0.82 where the live
    app said 2.00)."""
    out = tmp_path / "out"
    live = {}

    async def export(pilot) -> None:
        app = pilot.app
        app.set_status("idle", "")
        await pilot.press("x")
        await wait_for(pilot, lambda: "exported" in app.status.message, what="the export")

    async def scenario():
        proposer = oracle_proposer(pair, "The quick brown fox", 40, good=2)
        app = LiveApp(launch(pair, proposer=proposer), show_timings=False, export_dir=out)
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            for round_number in range(3):
                for _ in range(STAGES):
                    await press_and_settle(pilot, "s")
                    await export(pilot)
                if round_number == 0:
                    await export(pilot)  # the same commit twice: round-0000-6.json
            await press_and_settle(pilot, "s", "s")  # round 3 at its draft: not judged yet
            await export(pilot)
            live["decode"] = whole_decode(app.history)
            await pilot.press("q")

    run(scenario())
    session, = out.iterdir()
    snapshots = tmp_path / "snapshots"  # the exports alone, no trace beside them
    snapshots.mkdir()
    for file in session.glob("round-*.json"):
        shutil.copy(file, snapshots)
    assert len(list(snapshots.iterdir())) == 3 * STAGES + 1 + 1

    rounds, mean, slots = live["decode"]
    assert rounds == [0, 1, 2] and mean == 2.0
    recording = open_recording(snapshots)
    reading = ReadingPass(recording)
    reading.read_through()
    assert whole_decode(reading.histories(0)[0]) == live["decode"]
    # replay steps each round once, the mid-round one too (it shows what was exported)
    assert [(r.round, r.stage) for r in recording.sessions[0].rounds] == [
        (0, "commit"), (1, "commit"), (2, "commit"), (3, "draft")]

    # export: each round once, the completed ones as the session's trace has them
    exported, traced = load_trace(snapshots), load_trace(session / "trace.jsonl")
    assert [r["round"] for r in exported.rounds] == [0, 1, 2, 3]
    assert exported.rounds[:3] == traced.rounds
    assert [s for s in exported.slots if s["round"] < 3] == traced.slots
    assert exported.rounds[3]["accepted"] is None  # exported before verify: empty, as documented


@pytest.fixture(scope="module")
def trained_pair(pair, tmp_path_factory):
    """The fixture target with a drafter distilled from it for a few seconds: the random
    fixture drafter accepts nothing, so every later slot would read 0 on every path."""
    target, _ = pair
    out = tmp_path_factory.mktemp("distilled") / "drafter"
    shape = ["--layers", "1", "--block", "4", "--rank", "8", "--top-k", "8", "--batch", "4",
             "--seq-len", "96", "--anchors", "6", "--steps", "80", "--eval-every", "0",
             "--session-tokens", "0", "--no-progress"]
    assert main(["distill", str(target), "--out", str(out), "--num-prompts", "24",
                 "--max-new-tokens", "40", "--seed", "2", *shape, "--phase", "data"]) == 0
    assert main(["distill", str(target), "--out", str(out), *shape, "--phase", "train"]) == 0
    return target, out


def test_probe_bench_and_export_count_the_same_slots_for_one_decode(trained_pair, tmp_path,
                                                                     capsys):
    """One prompt of the fixture target decoded by `probe --out` and by `bench --slots`
    (the same prompt file, chat, block and budget): the same rounds, and the per-slot
    counts of the probe's rounds replayed equal the bench's JSON and a count over
    `export`'s slots table (the definitions docs/SNAPSHOT.md gives)."""
    target, draft = trained_pair
    prompts = tmp_path / "prompts"
    (prompts / "prose").mkdir(parents=True)
    prompt = prompts / "prose" / "01-fox.txt"
    prompt.write_text("The quick brown fox\n")
    block, tokens = "4", "48"
    probed, bench_json, tables = tmp_path / "probe", tmp_path / "bench.json", tmp_path / "tables"
    assert main(["probe", str(target), "--draft", str(draft), "--prompt-file", str(prompt),
                 "--block", block, "--max-tokens", tokens, "--out", str(probed)]) == 0
    assert main(["bench", str(target), "--draft", str(draft), "--prompts", str(prompts),
                 "--blocks", block, "--max-tokens", tokens, "--slots",
                 "--json", str(bench_json)]) == 0
    assert main(["export", str(probed), "--out", str(tables)]) == 0
    capsys.readouterr()

    summary = json.loads((probed / "summary.json").read_text())
    benched = json.loads(bench_json.read_text())
    run_, = benched["runs"]
    assert run_["accepted_per_round"] == summary["accepted_per_round"]
    assert run_["tokens"] == len(summary["tokens"])

    reading = ReadingPass(open_recording(probed))
    reading.read_through()
    history = reading.histories(0)[0]
    stats = aggregates.slot_stats(history, aggregates.every_round(history))
    assert history.accepted.values.tolist() == summary["accepted_per_round"]
    assert to_json([("prose", int(block), stats)]) == benched["slots"]

    rounds = {int(r["round"]): int(r["accepted"]) for r in csv.DictReader(open(tables / "rounds.csv"))}
    counted: dict[int, list[int]] = {}
    for row in csv.DictReader(open(tables / "slots.csv")):
        slot, accepted = int(row["slot"]), rounds[int(row["round"])]
        reached = slot <= accepted
        target_token, pick, argmax = int(row["target"]), int(row["proposal"]), int(row["argmax"])
        left = row["left_argmax"] == "true"
        counts = counted.setdefault(slot, [0] * 8)
        for i, hit in enumerate((True, row["accepted"] == "true", reached,
                                 reached and row["rank"] == "0", row["in_candidates"] == "true",
                                 left, left and reached and pick == target_token != argmax,
                                 left and reached and argmax == target_token != pick)):
            counts[i] += hit
    assert counted == {s.slot: [s.proposed, s.accepted, s.reached, s.rank0, s.in_k, s.left,
                                s.helped, s.hurt] for s in stats}
    # a decode with something in every column: accepted, reached and missed slots, the walk
    assert all(0 < s.accepted < s.proposed for s in stats[:3]) and any(s.helped for s in stats)
