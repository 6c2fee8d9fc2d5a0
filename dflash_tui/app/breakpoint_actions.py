"""The breakpoints of DebuggerApp: the menu (b) and the palette's toggles arm them; a run
stopped at a diverge breakpoint again and again at the default tolerance says, once, that
--compare-tol sets the bar. What the conditions are is dflash_tui/breakpoints.py's."""

from __future__ import annotations

from typing import Optional, Sequence

from ..breakpoints import Breakpoints
from ..compare_notes import TOL_HINT, TOL_HINT_AFTER, tol_hint_applies
from ..engine.compare_spec import DEFAULT_TOLERANCE
from ..engine.records import RoundRecord
from ..panels.status import Short


class BreakpointActions:
    """A part of DebuggerApp (a mixin): `armed` and the status line are the app's; the live
    app also hands the armed set to its engine (LiveApp.set_breakpoints)."""

    # the diverge breakpoint's --compare-tol hint: said at most once (not to nag)
    _tol_hinted = False
    _diverged_stops = (-1, 0)  # (round of the last diverge stop, stops in a row)

    def action_breakpoints(self) -> None:
        from ..panels.breakpoints import BreakpointsScreen  # first use: off the first frame

        if self.screen is self.main:
            self.push_screen(BreakpointsScreen(self.armed, compare=self.compared()),
                             self.set_breakpoints)

    def set_breakpoints(self, armed: Optional[Breakpoints]) -> None:
        """Apply the menu's answer (None: cancelled) and say what is armed now."""
        if armed is None:
            return
        changed = armed != self.armed
        newly_diverge = armed.diverge and not self.armed.diverge
        self.armed = armed
        self.update_status_right()
        self.set_status("info", f"breakpoints{'' if changed else ' unchanged'}: "
                                f"{armed.describe()}")
        if newly_diverge and tol_hint_applies(self.info):
            self.hint_compare_tol()

    def say_stop(self, where: str, found: Sequence[str]) -> None:
        """The status line's `⚑ round 0 commit: reason; reason`. Two reasons that fired at
        once do not fit 80 columns whole: the line then reads the first and `(+1 more: L)`
        (cut, the second went off the line unsaid); the log has them all."""
        short = Short(f"{where}: {found[0]}", len(found) - 1) if len(found) > 1 else None
        self.set_status("breakpoint", f"{where}: " + "; ".join(found), short=short)

    def breakpoint_stopped(self, record: RoundRecord) -> None:
        """A run stopped at a breakpoint on `record`: diverge stops in TOL_HINT_AFTER rounds
        in a row at the default tolerance say (once) that --compare-tol sets the bar. Only
        a divergence with a relative error counts: one with none (an overflow, non-finite on
        one side; a difference from an all-zero reference) no tolerance would pass."""
        compare = record.compare
        if not (self.armed.diverge and record.stage == "commit" and compare is not None
                and compare.first_divergent is not None
                and compare.first_divergent.rel_err is not None):
            return
        last, count = self._diverged_stops
        count = count + 1 if record.round == last + 1 else 1
        self._diverged_stops = (record.round, count)
        if count >= TOL_HINT_AFTER and compare.tolerance == DEFAULT_TOLERANCE:
            self.hint_compare_tol()

    def hint_compare_tol(self) -> None:
        if not self._tol_hinted:
            self._tol_hinted = True
            self.notify(TOL_HINT, timeout=8)

    def toggle_breakpoint(self, name: str) -> None:
        self.set_breakpoints(self.armed.toggled(name))
