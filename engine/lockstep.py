"""A session stepped on every rank of a group at once (docs/DISTRIBUTED.md).

Every rank runs the same session on the same inputs: the drafter is whole on each, the
sharded target's forwards meet in their all_sums, and what a rank decides on the host
(acceptance, sampling with the session's seed) comes from logits that are the same on every
rank. After the prefill and after every round the ranks compare what they have committed; a
difference ends the run on every rank with one line naming the rank (Mesh.agree).
"""

from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np

from .records import CommTiming, PrefillRecord, RoundRecord
from .round_scratch import RoundScratch
from .session import Session, Stage


class LockstepSession(Session):
    """A Session whose pair's target is sharded over `pair.mesh`; Pair.open makes one."""

    def __init__(self, pair, prompt_ids, **kwargs):
        super().__init__(pair, prompt_ids, **kwargs)
        self.mesh = pair.mesh
        self.info = replace(self.info, distributed=self.mesh.info)

    def prefill(self) -> PrefillRecord:
        record = super().prefill()
        self.mesh.agree("after the prefill", self._facts())
        return record

    def _finish_stage(self, r: RoundScratch, stage: Stage) -> RoundRecord:
        # Both ways of running a round (stepped and chained) end here.
        record = super()._finish_stage(r, stage)
        if not record.complete:
            return record
        lockstep_ms = self.mesh.agree(f"after round {record.round}", self._facts())
        # The round's target forwards: verify over [anchor, proposals], and the replay of
        # the accepted rows when a recurrent cache was restored.
        rows = [len(record.proposals) + 1]
        if record.rollback.kind == "replay":
            rows.append(record.rollback.rows)
        collectives, estimate_ms = self.mesh.target_comm(rows)
        commands_ms, self.mesh.commands_ms = self.mesh.commands_ms, 0.0
        record = replace(record, comm=CommTiming(lockstep_ms, commands_ms, collectives, estimate_ms))
        self._record = record  # `current` answers with the timed record
        return record

    def _facts(self) -> dict[str, int]:
        tokens = np.asarray(self.tokens, dtype=np.int32)
        return {"rounds": self.rounds_done, "tokens": len(self.tokens),
                "checksum": zlib.crc32(tokens.tobytes())}
