"""The whole-decode answers (tab 4's per-slot numbers, the rounds and their accepted counts)
agree wherever the tool gives them for the same decode: the live app, replay, `bench
--slots` and `export`, of the same rounds of the fixture pair however they were recorded;
the export alone answers them (docs/SNAPSHOT.md gives the recount), the --compare
reference's side included."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil

import pytest

from dflash_tui import aggregates
from dflash_tui.aggregates import TORN
from dflash_tui.app.live import LiveApp
from dflash_tui.app.reading_pass import ReadingPass
from dflash_tui.app.replay import load, open_recording
from dflash_tui.app.replay_app import ReplayApp
from dflash_tui.bench.slots import to_json
from dflash_tui.cli import main
from dflash_tui.tables import load_trace

from app_helpers import SIZE, launch, oracle_proposer, press_and_settle, run, wait_for, wait_loaded, \
    widget_text

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


def tab4_rows(stats, workload: str) -> list[list[str]]:
    """Tab 4's per-slot cells for `stats`, led by the workload as bench --slots' rows are
    (the tab's dash, —, as the bench writes it, -)."""
    from dflash_tui.panels.aggregates import slot_rows

    return [[workload, *(cell.plain.replace("—", "-") for cell in row)] for row in slot_rows(stats)]


def printed_slot_rows(report: str, side: str, block: str) -> list[list[str]]:
    """The body rows of the per-slot table bench --slots printed for `block`, on the
    drafter's side ("") or the reference's (", reference"): a header over its columns
    (checked against tab 4's), a rule, then a row per workload and slot (no cell holds a
    space)."""
    from dflash_tui.panels.aggregates import SLOT_HEADER

    part = report.split(f"Per slot, over every round of each workload{side}")[1]
    lines = part.splitlines()
    title = [line.rstrip() for line in lines].index(f"block {block}")
    header, rule = lines[title + 1], lines[title + 2]
    assert header.split()[0] == "workload" and rule.startswith("─"), lines[title:title + 3]
    assert " ".join(header.split()[1:]) == " ".join(SLOT_HEADER), header
    rows = []
    for line in lines[title + 3:]:
        if not line.strip() or line.startswith("block "):  # the argmax-missed table's title
            break
        rows.append(line.split())
    return rows


def test_probe_bench_and_export_count_the_same_slots_for_one_decode(trained_pair, tmp_path,
                                                                     capsys):
    """One prompt of the fixture target decoded by `probe --out` and by `bench --slots`
    (the same prompt file, chat, block and budget): the same rounds, and the per-slot
    counts of the probe's rounds replayed equal the bench's JSON and a count over
    `export`'s slots table (the definitions docs/SNAPSHOT.md gives); the bench's printed
    table has tab 4's columns, cell for cell (it left out `mean` and `neut`)."""
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
    printed = capsys.readouterr().out
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
    assert printed_slot_rows(printed, "", block) == tab4_rows(stats, "prose")
    assert all(s.rank_mean is not None for s in stats)  # a mean in every row

    rounds = {int(r["round"]): int(r["accepted"]) for r in csv.DictReader(open(tables / "rounds.csv"))}
    counted: dict[int, list[int]] = {}
    for row in csv.DictReader(open(tables / "slots.csv")):
        slot, accepted = int(row["slot"]), rounds[int(row["round"])]
        reached = slot <= accepted
        target_token, pick, argmax = int(row["target"]), int(row["proposal"]), int(row["argmax"])
        left = row["left_argmax"] == "true"
        ranked = row["logits_nonfinite"] != "true"  # a NaN / Inf row's rank is no rank
        counts = counted.setdefault(slot, [0] * 8)
        for i, hit in enumerate((True, row["accepted"] == "true", reached,
                                 reached and ranked and row["rank"] == "0",
                                 ranked and row["in_candidates"] == "true",
                                 left, left and reached and pick == target_token != argmax,
                                 left and reached and argmax == target_token != pick)):
            counts[i] += hit
    assert counted == {s.slot: [s.proposed, s.accepted, s.reached, s.rank0, s.in_k, s.left,
                                s.helped, s.hurt] for s in stats}
    # a decode with something in every column: accepted, reached and missed slots, the walk
    assert all(0 < s.accepted < s.proposed for s in stats[:3]) and any(s.helped for s in stats)


# ---- with --compare: torn, and the reference's near misses with its own K -----------------------

REFERENCE_K = 2  # the reference: the trained drafter with a selector K of its own (it has 8)


@pytest.fixture(scope="module")
def compared(trained_pair, tmp_path_factory):
    """One prompt decoded by `probe --out --compare REF` and `bench --slots --compare REF`,
    REF the trained drafter's weights with a selector K of 2 reading the target's layers in
    reverse, and the probe's rounds exported: (probe folder, bench JSON, bench's printed
    report, export folder)."""
    target, draft = trained_pair
    root = tmp_path_factory.mktemp("compared")
    reference = root / "reference"
    reference.mkdir()
    shutil.copy(draft / "model.safetensors", reference)
    config = json.loads((draft / "config.json").read_text())
    dflash = config["dflash_config"]
    assert dflash["selector_top_k"] != REFERENCE_K
    # its own K; and the target's layers in another order, so that its proposals part from
    # the drafter's in some rounds (past there the target's probabilities are unknown)
    dflash.update(selector_top_k=REFERENCE_K, target_layer_ids=dflash["target_layer_ids"][::-1])
    (reference / "config.json").write_text(json.dumps(config))
    prompts = root / "prompts"
    (prompts / "prose").mkdir(parents=True)
    prompt = prompts / "prose" / "01-fox.txt"
    prompt.write_text("The quick brown fox\n")
    common = ["--block", "4", "--max-tokens", "48", "--compare", str(reference)]
    probed, bench_json, tables = root / "probe", root / "bench.json", root / "tables"
    assert main(["probe", str(target), "--draft", str(draft), "--prompt-file", str(prompt),
                 *common, "--out", str(probed)]) == 0
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        assert main(["bench", str(target), "--draft", str(draft), "--prompts", str(prompts),
                     "--blocks", "4", "--max-tokens", "48", "--compare", str(reference),
                     "--slots", "--json", str(bench_json)]) == 0
    assert main(["export", str(probed), "--out", str(tables)]) == 0
    return probed, json.loads(bench_json.read_text()), report.getvalue(), tables


def recount(tables, side: str, torn: float = TORN) -> tuple[dict, list]:
    """Per slot, from the exported tables alone (docs/SNAPSHOT.md's recipe): the misses
    whose target's own top probability is known and of them the torn ones (p1 < `torn`);
    where the argmax missed on a reached slot with a rank, those with the candidates known
    and of them the ones among the K candidates (≤K). side: "" (the drafter) or "compare_"
    (the reference). And the K of every round."""
    rounds = list(csv.DictReader(open(tables / "rounds.csv")))
    accepted = {r["round"]: int(r[f"{side}accepted"]) for r in rounds}
    counted: dict[int, list[int]] = {}
    for row in csv.DictReader(open(tables / "slots.csv")):
        slot = int(row["slot"])
        reached = slot <= accepted[row["round"]]
        p1, in_k = row[f"{side}target_p1"], row[f"{side}in_candidates"]
        missed = reached and row[f"{side}accepted"] == "false" and p1 != ""
        off = reached and row[f"{side}logits_nonfinite"] == "false" and int(row[f"{side}rank"]) > 0
        counts = counted.setdefault(slot, [0] * 4)
        for i, hit in enumerate((missed, missed and float(p1) < torn, off and in_k != "",
                                 off and in_k == "true")):
            counts[i] += hit
    return counted, [r[f"{side}top_k"] for r in rounds]


def test_torn_and_the_references_near_misses_recount_from_the_export(compared, monkeypatch):
    """`torn` (of the reached misses, the target's own top token below p 0.5) for both
    sides and the reference's `≤K`, counted over `export`'s tables, equal what replay's tab
    4 and `bench --slots` count for the same decode; the rounds' K columns give each side's
    own K, which both near-miss headings show. The export had no column for the target's
    own top probability (torn could not be recounted), and the reference's K was not
    recorded: its heading read no K in the TUI and in bench."""
    probed, benched, report, tables = compared
    reading = ReadingPass(open_recording(probed))
    reading.read_through()
    history, reference = reading.histories(0)
    assert reference is not None
    for side, shown, in_bench, k in (("", history, benched["slots"], 8),
                                     ("compare_", reference, benched["compare"]["slots"],
                                      REFERENCE_K)):
        stats = aggregates.slot_stats(shown, aggregates.every_round(shown))
        assert to_json([("prose", 4, stats)]) == in_bench, side  # the TUI's numbers are bench's
        # and its printed table tab 4's cells, mean and neut too
        assert printed_slot_rows(report, ", reference" if side else "", "4") == \
            tab4_rows(stats, "prose"), side
        assert any(s.neutral for s in stats) or not side  # the reference's walk: a neut of 1
        counted, top_k = recount(tables, side)
        assert counted == {s.slot: [s.missed, s.torn, s.off_in_k_known, s.off_in_k]
                           for s in stats}, side
        assert set(top_k) == {str(k)} and {s.top_k for s in stats} == {k}, side
        # near misses in K and beyond it
        assert 0 < sum(s.off_in_k for s in stats) < sum(s.off_in_k_known for s in stats), side
        # The fixture target is never sure (its top p stays below 0.5: every miss is torn),
        # so the recipe is checked again where the line splits this decode's misses.
        assert sum(s.torn for s in stats) == sum(s.missed for s in stats) > 0, side
        monkeypatch.setattr(aggregates, "TORN", 0.2)
        split = aggregates.slot_stats(shown, aggregates.every_round(shown))
        monkeypatch.undo()
        assert 0 < sum(s.torn for s in split) < sum(s.missed for s in split), side
        assert recount(tables, side, torn=0.2)[0] == {
            s.slot: [s.missed, s.torn, s.off_in_k_known, s.off_in_k] for s in split}, side
    # the reference's probability is the drafter's row's while their prefixes agree, then unknown
    slots = list(csv.DictReader(open(tables / "slots.csv")))
    assert any(s["compare_target_p1"] == "" for s in slots)
    assert all(s["compare_target_p1"] in ("", s["target_p1"]) for s in slots)

    # bench --slots: each side's near-miss heading gives its own K
    drafter_part, reference_part = report.split("Per slot, over every round of each workload, reference")
    assert "block 4, argmax missed (K = 8)" in drafter_part
    assert f"block 4, argmax missed (K = {REFERENCE_K})" in reference_part

    # the TUI's tab 4, replaying the probe's rounds: both near-miss headings with their K
    async def scenario():
        app = ReplayApp(load(probed), show_timings=False, export_dir=probed / "unused")
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: app.reading() is None, what="the reading pass")
            await pilot.press("4")
            for name, k in (("agg-near-title", 8), ("agg-ref-near-title", REFERENCE_K)):
                title = app.main.query_one(f"#{name}")
                title.parent.scroll_to_widget(title, animate=False)
                app.render_now()
                await pilot.pause()
                assert widget_text(app, title).strip() == \
                    f"argmax missed: the true token's rank (K = {k})", name

    run(scenario())


def test_a_recording_made_before_the_columns_exports_them_empty(compared, tmp_path):
    """The probe's rounds as a recording made before the reference's K and (ranks off) the
    target's top probabilities: they export with those cells empty and replay with the
    reference's heading without a K, never an error."""
    probed, _, _, tables = compared
    older = tmp_path / "older"
    older.mkdir()
    for file in sorted(probed.glob("round-*.json")):
        record = json.loads(file.read_text())
        del record["compare"]["top_k"]
        for rank in record["ranks"]:
            rank["target_top"] = []
        (older / file.name).write_text(json.dumps(record))
    assert main(["export", str(older), "--out", str(tmp_path / "tables")]) == 0
    rounds = list(csv.DictReader(open(tmp_path / "tables" / "rounds.csv")))
    slots = list(csv.DictReader(open(tmp_path / "tables" / "slots.csv")))
    assert {r["compare_top_k"] for r in rounds} == {""} and {r["top_k"] for r in rounds} == {"8"}
    assert {s["target_p1"] for s in slots} == {s["compare_target_p1"] for s in slots} == {""}
    # the rest as the recording with them
    fresh = list(csv.DictReader(open(tables / "slots.csv")))
    assert [{k: v for k, v in s.items() if not k.endswith("target_p1")} for s in slots] == \
        [{k: v for k, v in s.items() if not k.endswith("target_p1")} for s in fresh]

    reading = ReadingPass(open_recording(older))
    reading.read_through()
    _, reference = reading.histories(0)
    stats = aggregates.slot_stats(reference, aggregates.every_round(reference))
    assert {s.top_k for s in stats} == {None} and {s.missed for s in stats} == {0}
