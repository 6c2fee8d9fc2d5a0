"""What the screen shows at one instant: the plain data every panel renders from.

The app (live or replay) builds one Frame per update and hands it to each panel; panels
keep nothing else. No Textual, so tests and replay can build frames directly.

Panels that read the history (numpy columns) import dflash_tui.aggregates when they first
draw one, not at import: numpy then loads after the first frame, as MLX does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from dflash_tui.engine.records import PrefillRecord, RoundRecord, SessionInfo

if TYPE_CHECKING:  # numpy stays off the first frame's imports
    from dflash_tui.history import History


@dataclass(frozen=True)
class Frame:
    info: Optional[SessionInfo] = None
    prefill: Optional[PrefillRecord] = None
    record: Optional[RoundRecord] = None  # the round on screen, as far as it has run
    # Every completed round of the session so far (summaries; append-only while shown) and
    # how many of its rows lead up to the round on screen (the header and history show those).
    history: Optional["History"] = None
    upto: int = 0
    # --compare: the same rounds from the reference's side (history.reference_side), which
    # the aggregates tab counts with the drafter's code
    reference_history: Optional["History"] = None
    text_before: str = ""  # committed text before the round on screen
    slot: int = 0  # the selected proposal slot (ranks and selector)
    mode: str = "live"  # "live" | "replay"
    round_label: str = ""  # e.g. "3" live, "3/12" in replay
    live: str = ""  # live, looking at an earlier round: where the session is ("round 12 verify")
    # gamma for the next round; None with an earlier round on screen (it ran at its own)
    gamma_next: Optional[int] = None
    # A second round shown beside the one on screen, differences marked (a pinned round).
    other: Optional[RoundRecord] = None
    other_label: str = ""  # its short name in column headers, e.g. "r3"
    # first and last round (None: all; an end None: open, as in `a 5-`)
    aggregate_rounds: Optional[tuple[Optional[int], Optional[int]]] = None
    # replay: (rounds read, rounds in all) while it still reads a trace for the history's
    # summaries (the history holds the rounds read so far); None once it has read them all
    reading: Optional[tuple[int, int]] = None
    show_timings: bool = True  # False freezes clocks (deterministic screenshots)
    failed: bool = False  # live: the session could not open; nothing more will load

    @property
    def gamma(self) -> Optional[int]:
        return self.record.gamma if self.record is not None else self.gamma_next

    @property
    def slots(self) -> int:
        return self.record.gamma if self.record is not None else 0

    @property
    def trained_gamma(self) -> Optional[int]:
        """The proposals per round the drafter was trained for (its block size - 1)."""
        return self.info.block_size - 1 if self.info is not None else None
