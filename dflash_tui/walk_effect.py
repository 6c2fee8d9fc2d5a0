"""Whether the selector's walk, where it left a slot's argmax, helped or hurt: one rule for
the Compare tab's ↷ colour (panels/compare.py) and the help / hurt counts of the aggregates
tab and `bench --slots` (aggregates.slot_stats), so the two never disagree.

Plain Python with no numpy import: the panels import it before the first frame, which
never waits for numpy. Its comparisons work elementwise on numpy arrays as on ints.
"""

from __future__ import annotations


def helped_hurt(pick, argmax, target):
    """(helped, hurt) of a walk that picked `pick` over the slot's `argmax`, judged by the
    target's token: helped where the pick was the target's token and the argmax was not,
    hurt where the argmax was and the pick was not (neither: neutral). Bools for ints,
    boolean arrays for arrays."""
    helped = (pick == target) & (argmax != target)
    hurt = (argmax == target) & (pick != target)
    return helped, hurt
