"""Validation acceptance as a greedy decode counts it: round after round along each stored
continuation.

evaluate.py scores blocks at anchors spread evenly over each answer, so every position
weighs the same. A decode does not visit positions evenly: a round that accepts k
proposals moves k + 1 tokens on, so easy stretches take few rounds and hard ones many,
and accepted per round (what `dflash-tui bench` reports) weighs the hard stretches more.
With half an answer at 7 accepted and half at 0, evenly spread anchors read 3.5 where the
decode reads 0.78. Both are right about what they count; only this one predicts the
bench.

Because the labels are the target's own greedy tokens, the decode is fixed by the
drafter's proposals alone: start at the first generated token, accept the longest prefix
equal to the stored continuation, move on by accepted + 1, repeat. Every sequence of a
group walks at once, one block per sequence per step, over the target's features computed
once for the whole sequence (the engine computes them round by round; the two agree up to
float summation order, and a test holds the rounds equal to an engine session's).
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from dflash_tui.engine.drafter import DraftModel

from .dataset import Sequences
from .evaluate import accepted_lengths, propose
from .objective import TargetParts, block_hidden_on, context_kv, target_features


@dataclass
class DecodedRound:
    anchor: int  # position of the round's first block token (the last committed one)
    proposals: list[int]
    accepted: int


def decode_rounds(drafter: DraftModel, parts: TargetParts, target, sequences: Sequences,
                  rows: list[int], gammas, seq_len: int, batch: int) -> dict[int, list[list[DecodedRound]]]:
    """For each gamma, the rounds a greedy decode at that many proposals makes along each
    listed sequence's stored continuation (truncated to seq_len), in the order of `rows`.
    The target's features and the drafter's context K/V are computed once per group of
    sequences, for every gamma."""
    out: dict[int, list[list[DecodedRound]]] = {g: [] for g in gammas}
    for start in range(0, len(rows), batch):
        group = rows[start:start + batch]
        width = min(seq_len, max(len(sequences.tokens[r]) for r in group))
        ids = np.zeros((len(group), width), dtype=np.int32)
        ends = np.zeros(len(group), dtype=np.int64)
        for j, r in enumerate(group):
            tokens = sequences.tokens[r][:width]
            ids[j, :len(tokens)] = tokens
            ends[j] = len(tokens)
        kv = context_kv(drafter, target_features(target, mx.array(ids)))
        mx.eval(kv)
        starts = np.array([int(sequences.prompt_lens[r]) for r in group], dtype=np.int64)
        for g in gammas:
            out[g].extend(_walk(drafter, parts, kv, ids, starts, ends, g))
    return out


def _walk(drafter: DraftModel, parts: TargetParts, kv, ids: np.ndarray, anchors: np.ndarray,
          ends: np.ndarray, gamma: int) -> list[list[DecodedRound]]:
    """Rounds along every row of ids [n, width] at once, each row from its anchor to its end."""
    n, width = ids.shape
    rounds: list[list[DecodedRound]] = [[] for _ in range(n)]
    active = anchors < ends - 1  # a round needs at least one token after its anchor to check
    while active.any():
        safe = np.where(active, anchors, 0)  # a finished row runs a one-row block, unused
        block = np.full((n, gamma + 1), drafter.config.mask_token_id, dtype=np.int32)
        block[:, 0] = ids[np.arange(n), safe]
        at = safe[:, None] + np.arange(1, gamma + 1)[None, :]
        labels = np.where(at < ends[:, None], ids[np.arange(n)[:, None], at.clip(max=width - 1)], -1)
        lengths = np.where(active, gamma, 0).astype(np.int32)
        hidden = block_hidden_on(drafter, parts, kv, width, mx.array(safe.astype(np.int32)),
                                 mx.array(block), mx.array(lengths))
        proposals, _ = propose(drafter, parts, hidden, mx.array(block[:, 0]))
        proposals = np.array(proposals)
        accepted = accepted_lengths(proposals, labels)
        for j in np.flatnonzero(active):
            rounds[j].append(DecodedRound(int(safe[j]), proposals[j].tolist(), int(accepted[j])))
        anchors = np.where(active, anchors + accepted + 1, anchors)
        active = anchors < ends - 1
    return rounds


def whole_length(sequences: Sequences) -> int:
    """A seq_len that truncates none of the sequences."""
    return max((len(t) for t in sequences.tokens), default=1)


def spread_rows(sequences: Sequences, limit: int | None) -> list[int]:
    """At most `limit` sequence indices spread evenly over the split (all when None), so a
    split ordered by kind keeps every kind."""
    n = len(sequences)
    if limit is None or limit >= n:
        return list(range(n))
    return sorted(set(np.linspace(0, n - 1, limit).round().astype(int).tolist()))


def decode_acceptance(drafter: DraftModel, parts: TargetParts, target, sequences: Sequences,
                      gammas, seq_len: int, batch: int, limit: int | None = None) -> dict:
    """{"sequences": n, "gamma": {"g": {"accepted", "rounds", "by_kind"}}}: accepted
    proposals per round, pooled over every round of every decoded sequence (overall and per
    kind), as the bench pools them. A kind whose answers left no round to walk is left out."""
    rows = spread_rows(sequences, limit)
    results = {}
    for g, decoded in decode_rounds(drafter, parts, target, sequences, rows, gammas, seq_len,
                                    batch).items():
        totals: dict[str, list[int]] = {}
        for r, rounds in zip(rows, decoded):
            if rounds:
                kind = totals.setdefault(sequences.kinds[r], [0, 0])
                kind[0] += sum(x.accepted for x in rounds)
                kind[1] += len(rounds)
        accepted = sum(a for a, _ in totals.values())
        count = sum(n for _, n in totals.values())
        results[str(g)] = {
            "accepted": accepted / max(count, 1), "rounds": count,
            "by_kind": {k: round(a / n, 4) for k, (a, n) in sorted(totals.items())},
        }
    return {"sequences": len(rows), "gamma": results}
