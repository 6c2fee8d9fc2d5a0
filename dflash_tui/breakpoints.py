"""Breakpoints: conditions on a round record that stop a run on the stage that met them.

Pure Python over plain records, so the engine thread (live runs), the replay player and the
tests all use the very same check. A condition only fires on the stage that first makes it
true, so resuming after a stop never trips again on the same evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from .engine.records import Compare, Divergent, RoundRecord

DEFAULT_RANK_THRESHOLD = 20
DEFAULT_POSITION = 256


@dataclass(frozen=True)
class Breakpoints:
    # a NaN / Inf in any buffer the stage just probed, or in the drafter's logits; with
    # --compare, on the reference's side too (at commit, where its record comes)
    nonfinite: bool = True
    zero_accepted: bool = False  # verify accepted none of the proposals
    rank_above: bool = False  # the target's token ranks above rank_threshold in the drafter
    rank_threshold: int = DEFAULT_RANK_THRESHOLD
    off_argmax: bool = False  # the DFlash2 walk left the plain argmax path
    position: bool = False  # the anchor reached position_at
    position_at: int = DEFAULT_POSITION
    diverge: bool = False  # --compare: the two configurations part beyond the tolerance

    def toggled(self, name: str) -> "Breakpoints":
        return replace(self, **{name: not getattr(self, name)})

    def describe(self) -> str:
        """Short list of what is armed, for the status line."""
        armed = []
        if self.nonfinite:
            armed.append("non-finite")
        if self.zero_accepted:
            armed.append("accepted=0")
        if self.rank_above:
            armed.append(f"rank>{self.rank_threshold}")
        if self.off_argmax:
            armed.append("off-argmax")
        if self.position:
            armed.append(f"pos≥{self.position_at}")
        if self.diverge:
            armed.append("diverge")
        return ", ".join(armed) if armed else "none"


# (field, menu label) in menu order; the numbers are edited beside their toggles.
TOGGLES = (
    ("nonfinite", "any NaN / Inf (a probe, or the drafter's logits)"),
    ("zero_accepted", "accepted == 0"),
    ("rank_above", "true-token rank above"),
    ("off_argmax", "selector path leaves the argmax"),
    ("position", "position reached"),
    ("diverge", "configurations diverge beyond tol (--compare)"),
)
# A session with --compare: the row's label says the reference's NaN / Inf stop it too.
# Whole at 80 columns on the menu's focused row (51 characters at most).
COMPARE_LABELS = {"nonfinite": "any NaN / Inf (a probe, logits, or the reference)"}


def toggles(compare: bool) -> tuple[tuple[str, str], ...]:
    """TOGGLES as a session with (compare) or without --compare reads them."""
    return tuple((name, COMPARE_LABELS.get(name, label) if compare else label)
                 for name, label in TOGGLES)


def hits(record: RoundRecord, armed: Breakpoints) -> tuple[str, ...]:
    """The armed conditions that the record's last stage made true, as short sentences."""
    stage = record.stage
    found = []
    if armed.nonfinite:
        bad = [p for p in record.probes if p.stage == stage and p.nonfinite]
        if bad:
            first = record.first_nonfinite or bad[0]
            layer = "" if first.layer is None else f" L{first.layer}"
            found.append(f"non-finite in {first.stage}{layer} {first.name} "
                         f"({len(bad)} buffer{'s' * (len(bad) > 1)})")
        elif stage == "draft" and record.nonfinite_logit_slots:
            # no probe saw it (probes off): the engine's own check of the drafter's logits
            found.append(f"drafter logits non-finite at {slot_spans(record.nonfinite_logit_slots)}")
        if stage == "commit" and record.compare is not None:
            reference = reference_nonfinite(record.compare, record.nonfinite_logit_slots)
            if reference is not None:
                found.append(reference)
    if stage == "verify":
        if armed.zero_accepted and record.accepted == 0:
            found.append("accepted == 0")
        if armed.rank_above:
            worst = _worst_rank(record)
            if worst is not None and worst.rank > armed.rank_threshold:
                found.append(f"true-token rank {worst.rank} > {armed.rank_threshold} at slot {worst.slot}")
    if stage == "select" and armed.off_argmax and record.selector is not None:
        off = record.selector.off_argmax_slots
        if off:
            found.append(f"selector left the argmax at {slot_spans(off)}")
    if armed.position:
        before = record.stages[-1].before.anchor_position if record.stages else record.position
        after = record.state_after.anchor_position
        if before < armed.position_at <= after:  # crossed by this stage (a commit)
            found.append(f"position {after} reached (≥ {armed.position_at})")
    if stage == "commit" and armed.diverge and record.compare is not None:
        first = record.compare.first_divergent
        # where it is the reference's first non-finite buffer, the non-finite stop said it
        said = armed.nonfinite and first is not None and first == _reference_buffer(record.compare)
        if first is not None and not said:
            # the buffer first: at 80 columns it is what must not be cut
            found.append(f"diverged at {first.where}: {first.why} (tol {record.compare.tolerance:g})")
    return tuple(found)


def reference_nonfinite(compare: Compare,
                        drafter_slots: Optional[tuple[int, ...]] = None) -> Optional[str]:
    """--compare: where the reference went NaN / Inf this round, or None. A float16
    reference that overflows behind a rounding-level divergence (a bfloat16 drafter at the
    default tolerance) stops here, not only on "diverge", which such a pair meets every
    round. Short, so that after `⚑ round 1234 commit: ` a diverge stop's words can follow
    at 80 columns: the buffer where it went bad (its logits, the count, are tab 5's), or
    its logits where no buffer was non-finite on its side only (both sides alike).

    Its logits count only at slots where the drafter's (`drafter_slots`, the round's
    nonfinite_logit_slots) were finite: a reference of a drafter with a NaN weight (another
    dtype of it) is NaN where the drafter is, and the drafter's own stop, at draft, said
    that already; counted again, a run stopped twice a round on the same NaN."""
    bad = _reference_buffer(compare)
    if bad is not None:
        layer = "" if bad.layer is None else f" L{bad.layer}"
        return f"reference non-finite from {bad.stage}{layer} {bad.buffer}"
    slots = [s for s in compare.nonfinite_logit_slots or () if s not in (drafter_slots or ())]
    if slots:
        return f"reference logits non-finite at {slot_spans(slots)}"
    return None


def _reference_buffer(compare: Compare) -> Optional[Divergent]:
    """The first buffer (pipeline order) holding a NaN / Inf on the reference's side that
    the drafter's lacks (the drafter's own are its probes' to name)."""
    return compare.first_nonfinite_on(("reference", "both"))


def spans(slots) -> str:
    """1, 2, 3, 5, 7, 8 as "1–3, 5, 7–8": a walk that leaves the argmax often leaves it at a
    run of slots, and fifteen numbers do not fit a status line."""
    out, start = [], None
    for i, slot in enumerate(slots):
        if start is None:
            start = slot
        if i + 1 == len(slots) or slots[i + 1] != slot + 1:
            out.append(str(slot) if slot == start else f"{start}–{slot}")
            start = None
    return ", ".join(out)


def slot_spans(slots) -> str:
    """`slot 3`, or `slots 1–3, 5` (spans)."""
    return f"slot{'s' * (len(slots) > 1)} {spans(slots)}"


def _worst_rank(record: RoundRecord):
    """The highest rank among slots that were judged on an accepted prefix (slots after the
    first rejection are conditioned on a wrong prefix: their ranks say little)."""
    judged = [r for r in record.ranks if not r.after_rejection]
    return max(judged, key=lambda r: r.rank) if judged else None

