"""The bench's arithmetic and inputs: per-position counting with shortened rounds, workload
loading, --blocks, and an interrupted run reporting what finished."""

from __future__ import annotations

import json

import pytest

from dflash_tui.bench.command import parse_blocks
from dflash_tui.bench.prompts import load_workloads
from dflash_tui.bench.stats import RoundStat, positions
from dflash_tui.cli import main
from dflash_tui.engine.errors import InputError
from dflash_tui.engine.session import Session


def rounds(*pairs) -> list[RoundStat]:
    return [RoundStat(gamma=g, accepted=a, committed=a + 1, stage_ms=(0.0,) * 5) for g, a in pairs]


def test_positions_count_only_proposed_slots():
    # Block 4, the last two rounds shortened by the token budget to 2 and 1 proposals.
    stats = positions(rounds((4, 4), (4, 1), (4, 0), (2, 2), (1, 0)), block=4)
    assert [(p.proposed, p.reached, p.eligible) for p in stats] == [
        (5, 3, 5),  # i = 1 (slot 0): all five rounds proposed it; three accepted it
        (4, 2, 3),  # i = 2 (slot 1): the 1-proposal round did not propose it
        (3, 1, 1),  # i = 3 (slot 2): only the round that accepted 4 got past slot 1
        (3, 1, 1),
    ]
    assert [p.acceptance for p in stats] == [3 / 5, 2 / 4, 1 / 3, 1 / 3]
    assert [p.conditional for p in stats] == [3 / 5, 2 / 3, 1.0, 1.0]


def test_positions_with_no_rounds_are_undefined():
    assert [(p.acceptance, p.conditional) for p in positions([], 2)] == [(None, None)] * 2
    # Nothing ever reached slot 1 (i = 2), so its conditional rate is undefined (not 0).
    only_misses = positions(rounds((2, 0), (2, 0)), 2)
    assert only_misses[1].acceptance == 0.0 and only_misses[1].conditional is None


def test_workloads_order_limit_and_ignored_files(tmp_path):
    for workload in ("zeta", "math", "prose", "code", ".hidden"):
        (tmp_path / workload).mkdir()
        for name in ("02-b", "01-a", "03-c"):
            (tmp_path / workload / f"{name}.txt").write_text(f"  {workload} {name}\n\n")
    (tmp_path / "code" / "notes.md").write_text("not a prompt")
    (tmp_path / "code" / ".01-hidden.txt").write_text("hidden")
    workloads = load_workloads(tmp_path, limit=2)
    assert [w.name for w in workloads] == ["prose", "code", "math", "zeta"]
    assert [p.id for p in workloads[1].prompts] == ["code/01-a", "code/02-b"]
    assert workloads[1].prompts[0].text == "code 01-a"


def test_sample_prompts_are_real():
    from dflash_tui.sample import PROMPTS_DIR

    workloads = load_workloads(PROMPTS_DIR)
    assert [w.name for w in workloads] == ["prose", "code", "math"]
    for w in workloads:
        assert len(w.prompts) >= 5
        assert all(len(p.text.split()) >= 15 for p in w.prompts)
        assert len({p.text for p in w.prompts}) == len(w.prompts)


def test_parse_blocks():
    # a set of blocks: measured in ascending order, a repeat folded (docs/BENCH.md)
    assert parse_blocks("8,2,4,4") == (2, 4, 8)
    assert parse_blocks(" 7 ") == (7,)
    for bad in ("", " ", "2;4", "-1", "1.5"):
        with pytest.raises(InputError, match="--blocks"):
            parse_blocks(bad)


@pytest.mark.parametrize("text", ["4,,7", ",4", "4,", ",", "4, ,7"])
def test_an_empty_block_item_is_refused_in_one_line(capsys, text):
    """A slip (a doubled or trailing comma) is named, not skipped: `4,,7` used to run 4 and 7."""
    from one_line import refusal

    refusal(capsys, ["bench", "/no/model/needed", "--blocks", text],
            f"--blocks {text!r}: an empty item; expected a proposal count of at least 1 on "
            "each side of every comma")


def test_interrupted_run_reports_what_finished(make_pair, tmp_path, capsys, monkeypatch):
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    (tmp_path / "prose").mkdir()
    (tmp_path / "prose" / "01.txt").write_text("The quick brown fox")
    (tmp_path / "prose" / "02.txt").write_text("The rain in Spain")
    step_round = Session.step_round

    def interrupted_on_second_prompt(self):
        if self.info.prompt == "The rain in Spain":
            raise KeyboardInterrupt
        return step_round(self)

    monkeypatch.setattr(Session, "step_round", interrupted_on_second_prompt)
    out = tmp_path / "partial.json"
    rc = main(["bench", str(target_dir), "--prompts", str(tmp_path), "--blocks", "2,3",
               "--max-tokens", "8", "--json", str(out)])
    stdout, stderr = capsys.readouterr()
    assert rc == 130
    assert "reporting the 1 prompt that finished every block" in stderr
    data = json.loads(out.read_text())
    assert data["complete"] is False
    assert [(c["workload"], c["block"], c["prompts"]) for c in data["cells"]] == [
        ("prose", 2, 1), ("prose", 3, 1)]
    assert "Accepted proposals per round" in stdout


def test_interrupted_before_any_prompt_finished_writes_nothing(make_pair, tmp_path, capsys, monkeypatch):
    """ctrl-c in the first prompt: nothing finished, so there is nothing to report, and a file
    of no prompts written over --json / --csv would have replaced an earlier run's results
    with one bench-diff cannot compare. Both are left as they were, and the line says so."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    (tmp_path / "prose").mkdir()
    (tmp_path / "prose" / "01.txt").write_text("The quick brown fox")

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "step_round", interrupted)
    json_path, csv_path = tmp_path / "results.json", tmp_path / "results.csv"
    json_path.write_text("an earlier run's results")
    rc = main(["bench", str(target_dir), "--prompts", str(tmp_path), "--blocks", "2",
               "--max-tokens", "4", "--json", str(json_path), "--csv", str(csv_path)])
    stdout, stderr = capsys.readouterr()
    assert rc == 130
    assert (f"bench: interrupted before any prompt finished every block; nothing to report, "
            f"{json_path} and {csv_path} not written") in " ".join(stderr.split())
    assert json_path.read_text() == "an earlier run's results" and not csv_path.exists()
    assert "wrote" not in stderr and "Accepted proposals per round" not in stdout


def _cell(workload, block, rounds, accepted, decode_s, target_tokens=100, target_s=10.0):
    from dflash_tui.bench.stats import Cell

    return Cell(workload=workload, block=block, prompts=1, rounds=rounds, tokens=0,
                accepted=accepted, rollbacks=0, positions=(), decode_tokens=rounds + accepted,
                decode_s=decode_s, target_decode_tokens=target_tokens,
                target_decode_s=target_s, stage_ms=(0.0,) * 5, checked=0, diverged=0)


def test_break_even_and_fastest_block():
    from dflash_tui.bench.stats import fastest
    from dflash_tui.bench.tables import implication_rows

    # Target alone: 100 ms a token. Block 2: 40 rounds in 6 s = 150 ms a round, so a round
    # must yield 1.5 tokens (0.5 accepted) to break even; block 7: 250 ms, 1.5 accepted.
    cells = [_cell("code", 2, rounds=40, accepted=40, decode_s=6.0),
             _cell("code", 7, rounds=20, accepted=20, decode_s=5.0),
             _cell("prose", 2, rounds=40, accepted=8, decode_s=6.0),
             _cell("prose", 7, rounds=20, accepted=60, decode_s=5.0)]
    assert cells[0].round_ms == pytest.approx(150.0) and cells[0].target_ms_per_token == 100.0
    assert [c.break_even for c in cells] == pytest.approx([0.5, 1.5, 0.5, 1.5])
    # tokens/s: code 80/6 = 13.3 at block 2 vs 40/5 = 8.0 at 7; prose 48/6 = 8.0 vs 80/5 = 16
    assert {w: c.block for w, c in fastest(cells).items()} == {"code": 2, "prose": 7}
    assert implication_rows(cells, [2, 7]) == [
        ["code", "2", "1.33x", "0.50", "ok", "1.50", "short"],
        ["prose", "7", "1.60x", "0.50", "short", "1.50", "ok"],
    ]
    assert _cell("x", 2, rounds=0, accepted=0, decode_s=0.0).break_even is None


def test_every_table_fits_80_columns_and_the_break_even_numbers_line_up():
    """The default blocks on the sample's workloads, the widest counts a long bench has. The
    verdict has a column of its own: in the number's cell, right-aligned, `0.50 ok` and
    `0.50 short` put their numbers in different columns."""
    import re
    from types import SimpleNamespace

    from rich.console import Console

    from dflash_tui.bench.stats import Cell, Position
    from dflash_tui.bench.tables import render

    blocks = (2, 4, 7, 8)
    cells = [Cell(workload=w, block=b, prompts=99, rounds=99_999, tokens=999_999,
                  accepted=(b + 1) * 30_000, rollbacks=99_999,
                  positions=tuple(Position(i, 99_999, 9_999, 99_999) for i in range(1, b + 1)),
                  decode_tokens=999_999, decode_s=50.0 * b * b * (1 + 2 * k), target_decode_tokens=999_999,
                  target_decode_s=1_234.5, stage_ms=(0.0,) * 5, checked=99, diverged=0)
             for k, w in enumerate(["prose", "code", "math", "all"]) for b in blocks]
    result = SimpleNamespace(cells=lambda: cells, compare=None,
                             settings=SimpleNamespace(blocks=blocks, slots=False))
    console = Console(width=80, record=True)
    console.print(render(result))
    lines = console.export_text().splitlines()
    assert "…" not in "\n".join(lines)
    assert max(len(line.rstrip()) for line in lines) <= 80
    start = next(i for i, line in enumerate(lines) if line.startswith("What the speed implies"))
    rows = lines[start + 3:start + 7]
    assert {row.split()[0] for row in rows} == {"prose", "code", "math", "all"}
    assert {"ok", "short"} <= set(" ".join(rows).split())
    points = [[m.start() for m in re.finditer(r"\d\.\d\d\b", row)] for row in rows]  # not 0.12x
    assert len(points[0]) == len(blocks) and all(p == points[0] for p in points), rows


@pytest.mark.parametrize("columns, widest", [(None, 200), ("100", 100), ("junk", 200)])
def test_a_piped_bench_wraps_its_captions_at_columns_where_set(make_pair, tmp_path, capsys,
                                                               monkeypatch, columns, widest):
    """Piped (as under capsys), the captions wrapped at 200 columns whatever COLUMNS said."""
    target_dir, _ = make_pair("llama", "DFlash2DraftModel")
    (tmp_path / "prose").mkdir()
    (tmp_path / "prose" / "01.txt").write_text("The quick brown fox")
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    capsys.readouterr()
    assert main(["bench", str(target_dir), "--prompts", str(tmp_path), "--blocks", "2",
                 "--max-tokens", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert widest - 20 < max(len(line.rstrip()) for line in lines) <= widest
