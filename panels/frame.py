"""What the screen shows at one instant: the plain data every panel renders from.

The app (live or replay) builds one Frame per update and hands it to each panel; panels
keep nothing else. Pure data, no Textual, so tests and replay can build frames directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dflash_tui.engine.records import PrefillRecord, RoundRecord, SessionInfo


@dataclass(frozen=True)
class Frame:
    info: Optional[SessionInfo] = None
    prefill: Optional[PrefillRecord] = None
    record: Optional[RoundRecord] = None  # the round on screen, as far as it has run
    rounds: tuple[RoundRecord, ...] = ()  # completed rounds up to the one on screen
    text_before: str = ""  # committed text before the round on screen
    slot: int = 0  # the selected proposal slot (ranks and selector)
    mode: str = "live"  # "live" | "replay"
    round_label: str = ""  # e.g. "3" live, "3/12" in replay
    gamma_next: Optional[int] = None  # gamma for the next round when it differs
    show_timings: bool = True  # False freezes clocks (deterministic screenshots)

    @property
    def gamma(self) -> Optional[int]:
        return self.record.gamma if self.record is not None else self.gamma_next

    @property
    def slots(self) -> int:
        return self.record.gamma if self.record is not None else 0
