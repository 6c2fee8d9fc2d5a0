"""Quitting a real process while its engine thread is inside a stage: the process leaves
at once (not after the stage: it never ends), exit code 0, no traceback, terminal restored.

The app runs in a child process on a pseudo-terminal (the real Linux driver, not the
headless test driver). The engine's forced-proposal hook holds the select stage open, as an
uninterruptible MLX op would: the child writes a marker file when it is inside.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
from pty_terminal import Terminal

RESTORED = "\x1b[?1049l"  # the app left the alternate screen: the terminal is restored

CHILD = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from dflash_tui.app.engine_thread import Launch
    from dflash_tui.app.main import run_live

    marker = Path(sys.argv[3])

    def proposer(tokens, gamma):
        marker.write_text("inside select")
        threading.Event().wait()  # never returns: an op that cannot be interrupted
        return []

    launch = Launch(model=Path(sys.argv[1]), draft=Path(sys.argv[2]), prompt="hi", gamma=3,
                    proposer=proposer)
    sys.exit(run_live(launch, export_dir=Path("unused")))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty test")
def test_quit_while_a_stage_runs_leaves_at_once(make_pair, tmp_path):
    target, draft = make_pair("llama", "DFlash2DraftModel")
    marker = tmp_path / "inside"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    term = Terminal([sys.executable, str(script), str(target), str(draft), str(marker)], cwd=tmp_path)
    try:
        term.wait_for(lambda: "dflash-tui" in term.text(), 30, "the first frame")
        term.type("c")  # queued while loading: the run starts after prefill
        term.wait_for(marker.exists, 60, "the engine to enter select")
        code, seconds = term.quit()
    finally:
        term.close()
    output = term.text()
    print(f"quit to exit: {seconds * 1000:.0f} ms")
    assert code == 0, output[-2000:]
    # The stage never ends: a quit that waited for it would never leave (quit's 10 s wait
    # raises). The bar tells that apart from a loaded machine's slow exit (interpreter
    # teardown), without timing the machine; the time itself is printed above.
    assert seconds < 5, f"quit took {seconds:.2f} s"
    assert "Traceback" not in output and "Error" not in output
    assert RESTORED in output  # the alternate screen was left: terminal restored


LIVE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from dflash_tui.app.engine_thread import Launch
    from dflash_tui.app.main import run_live

    launch = Launch(model=Path(sys.argv[1]), draft=Path(sys.argv[2]), prompt="hi", gamma=4)
    sys.exit(run_live(launch, export_dir=Path("exports")))
""")
DOWN = "\x1b[B"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty test")
def test_a_burst_of_slot_moves_then_q_quits(make_pair, tmp_path):
    """Key auto-repeat sends several slot moves in one write. Each used to make both slot
    tables echo a selection back, and the stale echoes flipped the slot back and forth for
    ever: the UI thread spun and `q` went unanswered."""
    target, draft = make_pair("llama", "DFlash2DraftModel")
    script = tmp_path / "child.py"
    script.write_text(LIVE)
    term = Terminal([sys.executable, str(script), str(target), str(draft)], cwd=tmp_path)
    try:
        term.when("ready after prefill", timeout=60)
        since = term.mark()
        term.type("n")
        term.when("round 0 done", since=since, timeout=60)
        term.type(".." + DOWN * 2 + "," + DOWN + ".." + DOWN * 3)  # one write, as auto-repeat does
        since = term.mark()
        pressed = term.type("q")
        # the app has answered q when it gives the terminal back (leaves the alternate
        # screen); tearing the process down afterwards is not the UI's to answer for
        seconds = term.when(RESTORED, since=since, timeout=30) - pressed
        code = term.process.wait(timeout=30)
    finally:
        term.close()
    print(f"q to the terminal restored after the burst: {seconds * 1000:.0f} ms")
    assert code == 0, term.text()[-2000:]
    # the bug was a spin for ever; 10 s tells that apart from a loaded machine's slowness
    assert seconds < 10.0, f"q took {seconds:.2f} s to be answered"
