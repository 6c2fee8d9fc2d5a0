"""The word lists and templates the prompt generators draw from, kept as package data
(prompt_data/NAME.json, one file per generator module) so the modules hold only the
procedures. Lists keep their order: the seeded draws, and so the shipped recipe's prompts,
depend on it."""

from __future__ import annotations

import json
from importlib import resources
from types import SimpleNamespace


def load(name: str) -> SimpleNamespace:
    """prompt_data/NAME.json's pools as attributes: P.TOPICS, P.NAMES, ..."""
    text = resources.files(__package__).joinpath("prompt_data", f"{name}.json").read_text(encoding="utf-8")
    return SimpleNamespace(**json.loads(text))
