"""MLX's cache of freed buffers, bounded while sessions decode.

MLX keeps freed device buffers for reuse rather than returning them. In a decode the
context grows every round, so many of a round's temporaries (attention scores over the
context, the caches' grown buffers) come in a size no earlier round had; a cached buffer is
reused only for a request near its own size, so the cache fills with buffers nothing will
ask for again and the process grows without bound (a tiny fixture: +41.6 MB of RSS over
750 rounds). mlx-lm's and Z Lab's loops call `mx.clear_cache()` every 256 tokens; that
empties the cache but the process still grew (+41 MB over 2,400 rounds, measured). A limit
keeps what a round reuses and frees the rest as it goes: over rounds 800 to 1,600 the same
decode grew by 2 MB, its context's own K/V (docs/PERFORMANCE.md, "Memory").

The limit is a sixteenth of the loaded weights, at least 32 MiB: far above what a round of
a large model reuses (a verify's activations and logits), and small beside the weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mlx.core as mx
from mlx.utils import tree_flatten

if TYPE_CHECKING:
    from .api import Pair

FLOOR = 32 << 20
SHARE_OF_WEIGHTS = 16


def weights_bytes(pair: "Pair") -> int:
    arrays = tree_flatten(pair.target.model.parameters()) + tree_flatten(pair.drafter.parameters())
    return sum(int(a.nbytes) for _, a in arrays)


def buffer_cache_limit(pair: "Pair") -> int:
    return max(FLOOR, weights_bytes(pair) // SHARE_OF_WEIGHTS)


def bound_buffer_cache(pair: "Pair") -> int:
    """Set MLX's (process-wide) buffer cache limit for decoding on `pair`; returns it."""
    limit = buffer_cache_limit(pair)
    mx.set_cache_limit(limit)
    return limit
