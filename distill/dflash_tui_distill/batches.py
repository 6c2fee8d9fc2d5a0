"""Training batches: B sequences, each packed with A blocks at random anchors.

A block anchored at position a is [token_a, mask x gamma] at positions a..a+gamma; its
labels are tokens a+1..a+gamma, which are the target's greedy choices because anchors are
drawn from the continuation (a >= prompt length: at inference the first anchor is the
first generated token) and a + gamma stays inside the sequence. Its context is rows
0..a-1 of the target's capture, so the packed mask hides every row from a on.

Shapes never change within a run (B, S, A, gamma fixed; short sequences are padded and
spare blocks carry length 0), so a compiled step is traced once.

Short blocks: with probability `short_block_fraction` a block's effective length g is
drawn uniformly from 1..gamma-1 and its rows past g are hidden from every row (the key
mask) and carry no loss. Because the block convolution is causal and the MLP is per row,
rows 0..g then compute exactly what an inference block of g proposals computes, so one
fixed shape also trains the 2..8-proposal blocks the bench runs.

Everything here is numpy on the host; the sampler's state (epoch, cursor, RNG) is plain
JSON so a resumed run draws the very same batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dataset import Sequences


@dataclass
class Batch:
    ids: np.ndarray  # [B, S] sequence tokens, right-padded
    anchors: np.ndarray  # [B*A] anchor positions
    block: np.ndarray  # [B*A, gamma+1] anchor token then mask tokens
    labels: np.ndarray  # [B*A, gamma]
    lengths: np.ndarray  # [B*A] proposals that count (0: a padding block)

    @property
    def label_tokens(self) -> int:
        return int(self.lengths.sum())


def anchor_range(length: int, prompt_len: int, seq_len: int, gamma: int) -> tuple[int, int]:
    """First and last valid anchor (last < first: none) for a sequence truncated to seq_len."""
    usable = min(length, seq_len)
    return prompt_len, usable - 1 - gamma


def eligible(sequences: Sequences, seq_len: int, gamma: int) -> np.ndarray:
    keep = []
    for i, tokens in enumerate(sequences.tokens):
        first, last = anchor_range(len(tokens), int(sequences.prompt_lens[i]), seq_len, gamma)
        if last >= first:
            keep.append(i)
    return np.array(keep, dtype=np.int64)


def make_batch(sequences: Sequences, rows: np.ndarray, anchors_per_seq: int, seq_len: int,
               gamma: int, mask_token_id: int, rng: np.random.Generator,
               short_block_fraction: float = 0.0, pad_id: int = 0) -> Batch:
    b, a = len(rows), anchors_per_seq
    ids = np.full((b, seq_len), pad_id, dtype=np.int32)
    anchors = np.zeros((b, a), dtype=np.int32)
    lengths = np.zeros((b, a), dtype=np.int32)
    for j, row in enumerate(rows):
        tokens = sequences.tokens[row][:seq_len]
        ids[j, :len(tokens)] = tokens
        first, last = anchor_range(len(sequences.tokens[row]), int(sequences.prompt_lens[row]),
                                   seq_len, gamma)
        count = last - first + 1
        take = min(a, count)
        anchors[j, :take] = first + rng.choice(count, size=take, replace=False)
        anchors[j, take:] = first
        lengths[j, :take] = gamma
    if short_block_fraction > 0 and gamma > 1:
        short = rng.random((b, a)) < short_block_fraction
        g = rng.integers(1, gamma, size=(b, a))
        lengths = np.where(short & (lengths > 0), g, lengths).astype(np.int32)
    offsets = anchors[:, :, None] + np.arange(1, gamma + 1)[None, None, :]
    labels = np.take_along_axis(ids[:, None, :], offsets.clip(max=seq_len - 1), axis=2)
    anchor_tokens = np.take_along_axis(ids, anchors, axis=1)
    block = np.full((b, a, gamma + 1), mask_token_id, dtype=np.int32)
    block[:, :, 0] = anchor_tokens
    n = b * a
    return Batch(ids=ids, anchors=anchors.reshape(n), block=block.reshape(n, gamma + 1),
                 labels=labels.reshape(n, gamma).astype(np.int32), lengths=lengths.reshape(n))


class BatchSampler:
    """Sequences in a fresh random order each epoch; anchors drawn per batch."""

    def __init__(self, sequences: Sequences, batch: int, anchors: int, seq_len: int,
                 gamma: int, mask_token_id: int, seed: int, short_block_fraction: float):
        self.sequences = sequences
        self.batch, self.anchors, self.seq_len, self.gamma = batch, anchors, seq_len, gamma
        self.mask_token_id = mask_token_id
        self.short_block_fraction = short_block_fraction
        self.rows = eligible(sequences, seq_len, gamma)
        self.seed = seed
        self.rng = np.random.default_rng(seed)  # anchors and short-block lengths
        self.epoch, self.cursor = 0, 0
        self.order = self._order()

    def __len__(self) -> int:
        return len(self.rows)

    def _order(self) -> np.ndarray:
        """The epoch's sequence order: a function of (seed, epoch) alone."""
        return np.random.default_rng((self.seed, self.epoch)).permutation(len(self.rows))

    def next(self) -> Batch:
        picked = []
        while len(picked) < self.batch:
            if self.cursor >= len(self.order):
                self.epoch += 1
                self.cursor = 0
                self.order = self._order()
            picked.append(self.rows[self.order[self.cursor]])
            self.cursor += 1
        return make_batch(self.sequences, np.array(picked), self.anchors, self.seq_len,
                          self.gamma, self.mask_token_id, self.rng, self.short_block_fraction)

    def state(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor, "rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self.epoch, self.cursor = int(state["epoch"]), int(state["cursor"])
        self.rng.bit_generator.state = state["rng"]
        self.order = self._order()
