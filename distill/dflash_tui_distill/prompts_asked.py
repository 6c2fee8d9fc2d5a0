"""`asked` prompts: user turns the target samples itself, from its own chat template.

An instruct model has learned, besides its answers, what its users ask: decoding from the
start of a user turn (`<|im_start|>user\n` after the system message) samples questions and
requests in that distribution, in words no template here chose. A system message steers
the domain; it is used only to sample the question. The answer is then decoded greedily
under the plain chat template, as the engine and the bench decode every prompt.

Only turns the target closed itself (its end-of-turn token within ASKED_TOKENS) are kept:
a turn cut off by the limit would be a question with its end missing.
"""

from __future__ import annotations

import random

from dflash_tui.engine.errors import InputError

ASKED_TOKENS = 160  # longest user turn sampled
ASKED_TEMPERATURE = 0.8  # at 1.0 about one turn in eight of the 135M target was word salad

# steer -> (share, system message); "general" keeps the template's own system message
STEERS = {
    "general": (0.25, None),
    "math": (0.4, "You are a math tutor. The student asks you math questions."),
    "code": (0.35, "You are a Python programming assistant."),
}


def seed_text(r: random.Random) -> str:
    """A seed `steer:number` (distinct, as every prompt of a kind must be); the data phase
    turns it into a user turn sampled under that steer."""
    names = sorted(STEERS)
    steer = r.choices(names, weights=[STEERS[n][0] for n in names])[0]
    return f"{steer}:{r.randrange(1 << 40)}"


def steer_of(seed_text: str) -> str:
    return seed_text.split(":", 1)[0]


def user_turn_prefix(tokenizer, steer: str) -> str:
    """The chat template's text up to where a user's message begins."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise InputError("--mix asked: this target's tokenizer has no chat template, so there "
                         "is no user turn to sample (drop `asked` from --mix)")
    mark = "\x00USER\x00"
    system = STEERS[steer][1]
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": mark}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    return text[:text.index(mark)]


def clean_asked(text: str | None) -> str | None:
    """The sampled turn, or None if it is unusable (cut off, too short or too long)."""
    if not text:
        return None
    text = text.strip()
    if len(text) < 16 or len(text) > 1200 or "<|im_start|>" in text:
        return None
    return text
