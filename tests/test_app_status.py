"""The status line at 80 columns: what tells a message apart comes first and is on screen
whatever is armed; the message wins over the right side; a cut message ends in `… [L]` and
`L` shows the message log with every message whole; sorting, filtering and pinning say what
they did."""

from __future__ import annotations

from dflash_tui.breakpoints import Breakpoints
from dflash_tui.panels.help import HelpScreen
from dflash_tui.panels.status import CUT, Short, StatusLog, status_text

from app_helpers import live_app, press_and_settle, run, wait_for, wait_idle, wait_loaded, \
    widget_text

SMALL = (80, 24)
ARMED_PARTS = [("breaks: non-finite, accepted=0, rank>20, off-argmax",
                "⚑ non-finite, accepted=0, rank>20, off-argmax"),
               ("files → out/20250301-142233/", "→ …/20250301-142233/")]


def status_line(app) -> str:
    return widget_text(app, app.main.query_one("#status"))


async def type_answer(pilot, key: str, text: str) -> None:
    app = pilot.app
    await pilot.press(key)
    await wait_for(pilot, lambda: app.main.asking, what="the question line")
    app.main.query_one("#ask-input").value = ""
    await pilot.press(*text, "enter")
    await wait_for(pilot, lambda: not app.main.asking, what="the answer")
    await pilot.pause()


def test_the_message_wins_over_the_right_side():
    stop = "round 0 select: selector left the argmax at slot 5"
    line, cut = status_text("breakpoint", stop, ARMED_PARTS, 78)
    assert line.plain.startswith("⚑ " + stop) and not cut and len(line.plain) == 78
    assert "off-argmax" not in line.plain  # the armed list gave way (the `b` menu has it)
    # a short message leaves the right side whole
    line, _ = status_text("paused", "paused after round 3 verify", ARMED_PARTS, 120)
    assert line.plain.endswith("breaks: non-finite, accepted=0, rank>20, off-argmax  "
                               "files → out/20250301-142233/")
    # too long for the line: cut, ending in the log's key, nothing on the right
    long = "exported round-0012-2.json + .npz · round 12 commit → /tmp/" + "d" * 80 + "/"
    line, cut = status_text("info", long, ARMED_PARTS, 78)
    assert cut and line.plain.endswith(CUT) and len(line.plain) == 78
    assert line.plain.startswith("exported round-0012-2.json + .npz · round 12 commit")


def test_a_stop_with_two_reasons_reads_the_first_and_counts_the_other():
    """Two breakpoints fired on one stage: at 80 columns the joined message was cut in the
    second reason, which then read as the only one. The short form says the first whole
    and `(+1 more: L)`; where even that is too long, the first is cut and the count stays;
    where the whole fits, it is shown whole."""
    first = "round 0 commit: reference non-finite from draft L0 ffn_out"
    whole = first + "; diverged at context capture: rel err 0.000229 (tol 1e-05)"
    short = Short(first, 1)
    line, cut = status_text("breakpoint", whole, ARMED_PARTS, 78, short)
    assert line.plain.rstrip() == f"⚑ {first} (+1 more: L)" and cut, line.plain
    assert len(line.plain) == 78
    line, _ = status_text("breakpoint", whole, ARMED_PARTS, 60, short)
    assert line.plain.startswith("⚑ round 0 commit: reference non-finite")
    assert line.plain.endswith("… (+1 more: L)") and len(line.plain) == 60, line.plain
    line, cut = status_text("breakpoint", whole, (), 200, short)
    assert line.plain.rstrip() == f"⚑ {whole}" and not cut


def test_the_log_keeps_outcomes_not_progress():
    log = StatusLog(size=3)
    log.add("busy", "computing round 0 draft…")
    log.add("busy", "computing round 0 draft… 0.6 s")  # a tick replaces the last progress
    assert [e.text for e in log] == ["computing round 0 draft… 0.6 s"]
    log.add("paused", "paused after round 0 draft")  # and so does a position
    log.add("breakpoint", "round 0 draft: accepted == 0")  # the outcome replaces them
    log.add("breakpoint", "round 0 draft: accepted == 0")  # a repeat is no new entry
    log.add("info", "")  # nor an empty message
    assert [(e.kind, e.text) for e in log] == [("breakpoint", "round 0 draft: accepted == 0")]
    for n in range(4):
        log.add("info", f"m{n}")
    assert [e.text for e in log] == ["m1", "m2", "m3"]  # the last `size`
    # a search's hits, walked with n, are positions: each replaces the one before, and the
    # next message the last one, so a walk pushes out no outcome
    for n in range(10):
        log.add("info", f"find 'x': round {n} slot 0 (proposal)", transient=True)
    assert [e.text for e in log] == ["m2", "m3", "find 'x': round 9 slot 0 (proposal)"]
    log.add("info", "exported round-0009.json")
    assert [e.text for e in log] == ["m2", "m3", "exported round-0009.json"]


def test_two_exports_of_a_round_differ_on_screen_and_the_log_has_them_whole(pair, tmp_path):
    exports = tmp_path / "exports-in-a-directory-with-a-rather-long-name"

    async def scenario():
        app = live_app(pair, {"export_dir": exports})
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            for name in ("round-0000.json", "round-0000-2.json"):
                await pilot.press("x")
                await wait_for(pilot, lambda: name in app.status.message, what=f"the export of {name}")
                await pilot.pause()
                line = status_line(app)
                assert f"exported {name} · round 0 commit" in line
                assert app.status.cut and line.rstrip().endswith(CUT)  # the directory is long
            directory = app.session_dir.path
            whole = [f"exported {name} · round 0 commit → {directory}/"
                     for name in ("round-0000.json", "round-0000-2.json")]
            assert [e.text for e in app.status_log if e.text.startswith("exported")] == whole
            await pilot.press("L")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the message log")
            assert app.screen.text().splitlines()[:2] == [f"info {text}" for text in reversed(whole)]
            shown = widget_text(app, app.screen.query_one("#messages"))
            assert "round-0000-2.json" in shown and "round-0000.json" in shown
            assert len(shown.splitlines()[0]) <= SMALL[0]
            await pilot.press("L")
            await wait_for(pilot, lambda: app.screen is app.main, what="the log to close")

    run(scenario())


def test_a_stop_names_its_reason_at_80_columns_whatever_is_armed(nan_pair):
    armed = Breakpoints(nonfinite=True, zero_accepted=True, rank_above=True, off_argmax=True)

    async def scenario():
        app = live_app(nan_pair, {"armed": armed})
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            await pilot.press("c")
            await wait_for(pilot, lambda: app.status.kind == "breakpoint", what="the breakpoint")
            await wait_idle(pilot)
            assert "⚑ round 0 draft: non-finite in draft L1 ffn_out (5 buffers)" in status_line(app)
            assert not app.status.cut
            assert app.status_log.entries[-1].text == app.status.message

    run(scenario())


def test_probe_sort_filter_and_pin_say_what_they_did(pair):
    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            total = len(app.record.probes)
            await press_and_settle(pilot, "o")
            assert f"probes sorted by L ↑: {total} buffers" in status_line(app)
            await press_and_settle(pilot, "O")
            assert f"probes sorted by L ↓: {total} buffers" in status_line(app)
            await type_answer(pilot, "F", "draft")
            kept = sum(1 for p in app.record.probes if "draft" in f"{p.stage} {p.name}".lower())
            assert 0 < kept < total
            assert f"probes filter draft: {kept} of {total} buffers · sorted by L ↓" in status_line(app)
            await press_and_settle(pilot, "right_square_bracket")
            assert "probes layer —: " in status_line(app)
            await press_and_settle(pilot, "P")
            assert "pinned round 0: shown beside other rounds (vs r0)" in status_line(app)
            assert app.pinned is app.record
            await press_and_settle(pilot, "P")
            assert "unpinned round 0" in status_line(app) and app.pinned is None

    run(scenario())


def test_while_a_question_is_open_the_key_bar_shows_its_keys_only(pair):
    """`g`, `a`, `/`, `F`: the key bar said `+ γ+  - γ-` (and kept every other key it had
    room for) though `+` and `-` went into the field; now it names the question's keys, enter
    and escape (and f1, help: `?` is typed), and the session's keys come back when it
    closes."""
    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            keys = app.main.query_one("#keys")
            before, gamma = widget_text(app, keys), app.gamma_next
            assert " + γ+ " in before and " s stage " in before
            for key in ("g", "a", "slash", "F"):
                await pilot.press(key)
                await wait_for(pilot, lambda: app.main.asking, what="the question line")
                await pilot.pause()
                shown = widget_text(app, keys).split()
                assert shown == ["⏎", "answer", "esc", "cancel", "f1", "help", "^p", "palette"], \
                    (key, shown)
                field = app.main.query_one("#ask-input")
                field.value = ""
                await pilot.press("plus", "minus")
                assert field.value == "+-" and app.gamma_next == gamma  # typed, not γ
                await pilot.press("escape")
                await wait_for(pilot, lambda: not app.main.asking, what="the question to close")
                await pilot.pause()
                assert widget_text(app, keys) == before, key

    run(scenario())


def test_f1_opens_the_help_over_a_question_which_stays_open_as_typed(pair):
    """While a question is open `?` is typed into it, so the key bar had no way to help at
    all (`⏎ answer  esc cancel`); f1, which it now names, opens the help, and escape comes
    back to the question with what was typed, still taking keys."""
    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            await pilot.press("slash", "a", "question_mark", "f1")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main, what="the help to close")
            field = app.main.query_one("#ask-input")
            assert app.main.asking and field.value == "a?"
            await pilot.press("b")
            assert field.value == "a?b"

    run(scenario())


def test_a_search_at_80_columns_keeps_help_and_its_way_out_in_the_key_bar(pair):
    """A search's hits walked at 80 columns: `n next hit` is wider than `n round`, and the
    key bar ended `/ find  P pin  ? help` (escape, which ends the search, was never named;
    one key wider and help went too). Help and `esc end search` are fitted first; what the
    search needs least gives way."""
    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n")
            token = app.record.target_tokens[0]
            await type_answer(pilot, "slash", f"#{token}")
            assert app.searching is not None
            keys = app.main.query_one("#keys")
            shown = widget_text(app, keys)
            assert " n next hit " in shown and " esc end search " in shown, shown
            assert " ? help " in shown and len(shown.rstrip()) <= SMALL[0], shown
            await press_and_settle(pilot, "escape")
            await pilot.pause()
            assert "end search" not in widget_text(app, keys)

    run(scenario())


def test_under_the_palette_the_key_bar_names_only_the_way_back(pair):
    """The palette leaves the key bar in sight, which went on listing `s stage … q quit`:
    keys that, while the palette is open, are typed into its search."""
    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            keys = app.main.query_one("#keys")
            before = widget_text(app, keys)
            assert " s stage " in before
            await pilot.press("ctrl+p")
            await wait_for(pilot, lambda: app.screen is not app.main, what="the palette")
            await pilot.pause()
            assert widget_text(app, keys).split() == ["esc", "back"]
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.main, what="the palette to close")
            await pilot.pause()
            assert widget_text(app, keys) == before

    run(scenario())


def test_the_key_bar_fits_its_hints_from_the_first_frame(recorded, monkeypatch):
    """The key bar fitted its hints to its width, which it has only after its first layout:
    the first frame drew every hint and the terminal cut the last (`q quit  b` at 80
    columns, for a moment on every start). Every line it draws fits, the first too."""
    from pathlib import Path

    from dflash_tui.app.replay import load
    from dflash_tui.app.replay_app import ReplayApp
    from dflash_tui.panels.footer import KeyBar

    drawn = []
    update = KeyBar.update
    monkeypatch.setattr(KeyBar, "update", lambda self, text, **kw: (
        drawn.append(text.cell_len), update(self, text, **kw))[1])

    async def scenario():
        app = ReplayApp(load(recorded[0]), show_timings=False, export_dir=Path("unused"))
        async with app.run_test(size=SMALL) as pilot:
            await pilot.pause()
            assert " q quit " in widget_text(app, app.main.query_one("#keys"))
        assert drawn and all(cells <= SMALL[0] for cells in drawn), drawn

    run(scenario())


def test_a_terminal_below_80x24_is_told_once_each_time_it_gets_so(pair):
    def warnings(app) -> list[str]:
        return [e.text for e in app.status_log if "dflash-tui is laid out for 80×24" in e.text]

    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=(60, 20)) as pilot:
            await wait_loaded(pilot)
            assert warnings(app) == ["the terminal is 60×20: dflash-tui is laid out for 80×24 or more"]
            await press_and_settle(pilot, "n")
            await pilot.resize_terminal(70, 24)
            await pilot.resize_terminal(*SMALL)
            await wait_for(pilot, lambda: not app._small, what="80×24 handled")
            assert len(warnings(app)) == 1  # 70×24 was still small: not said again
            await pilot.resize_terminal(79, 30)
            await wait_for(pilot, lambda: len(warnings(app)) == 2, what="the second notice")
            assert "79×30" in warnings(app)[-1]

    run(scenario())


def test_a_resize_lays_the_left_column_out_at_once(pair):
    """Grown and shrunk back to 80×24, the left column is as it was at 80×24 (the state panel
    compact, the tokens panel its height and scrolled to its end), without waiting for the
    round on screen to change."""
    async def scenario():
        app = live_app(pair, prompt="The quick brown fox jumps over the lazy dog. " * 6)
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            await press_and_settle(pilot, "n", "n", "n")
            left = [app.main.query_one(f"#{name}") for name in ("stream", "state", "history")]
            state = left[1]

            def shown() -> list:
                return [(widget.region, widget_text(app, widget)) for widget in left]

            at_80x24 = shown()
            assert left[0].max_scroll_y > 0  # the tokens overflow their panel at 80×24

            def tall() -> bool:  # the state panel's derived rows are shown
                return "anchor pos" in widget_text(app, state)

            assert not tall()
            await pilot.resize_terminal(200, 50)
            await wait_for(pilot, tall, what="the tall layout")
            await pilot.resize_terminal(*SMALL)
            await wait_for(pilot, lambda: app.main.query_one("#header").region.width == SMALL[0],
                           what="the 80×24 layout")
            await pilot.pause()
            assert shown() == at_80x24

    run(scenario())


def test_a_notification_shows_brackets_as_typed(pair):
    """A notification is plain text: `find '[/x]'` (a stray closing tag to Textual's markup)
    crashed the app with a MarkupError, and `[b]` or mlx's `[load_safetensors]` vanished.
    Textual's own quit hint, in markup, reached the message log with its tags (`Press
    [b]ctrl+q[/b] to quit the app`)."""
    from textual.widgets._toast import Toast

    async def scenario():
        app = live_app(pair)
        async with app.run_test(size=SMALL, notifications=True) as pilot:
            await wait_loaded(pilot)
            def toasts() -> str:
                return " ".join(line.strip(" ▌") for toast in app.screen.query(Toast)
                                for line in widget_text(app, toast).splitlines())

            for query in ("[/x]", "[b]"):
                await type_answer(pilot, "slash", query)
                await wait_for(pilot, lambda: f"find '{query}': not in any round" in toasts(),
                               what=f"the notification of {query}, as typed")
            await pilot.press("ctrl+c")  # Textual's own hint, in its markup: bold, no tags
            await wait_for(pilot, lambda: "to quit the app" in toasts(), what="the quit hint")
            assert "Press ctrl+q to quit the app" in toasts()
            # and the message log (L) keeps the words, not the tags
            assert list(app.status_log)[-1].text == \
                "Do you want to quit?: Press ctrl+q to quit the app"

    run(scenario())


def test_a_sessions_notes_are_notified_once_whole(nan_pair):
    """A note can name the cause of what the probes then show (here the NaN weight behind the
    first non-finite buffer). On the status line it was cut at 80 columns (`(note: …
    [L]`) and replaced by the first key's message; now each note is a notification too, whole,
    and a restart on the same drafter does not say it again."""

    async def scenario():
        app = live_app(nan_pair)
        async with app.run_test(size=SMALL) as pilot:
            await wait_loaded(pilot)
            await wait_idle(pilot)
            note = ("note: model.safetensors: tensor 'layers.1.mlp.down_proj.weight' holds 8,192 "
                    "NaNs (of 8,192 values): the buffers computed from it will be non-finite")
            # notify() logs each notification (the toast itself expires on its own clock)
            said = lambda: [e.text for e in app.status_log if e.text.startswith("note:")]  # noqa: E731
            assert said() == [note]
            first = app.trace
            await pilot.press("r")
            await wait_for(pilot, lambda: app.trace not in (None, first), what="the restart")
            await wait_idle(pilot)
            assert said() == [note]

    run(scenario())
