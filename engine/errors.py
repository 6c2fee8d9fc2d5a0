"""The one error type a user sees.

Anything wrong with what the user gave us (a path, a checkpoint, a value) is raised as an
InputError whose message is a single line naming the file, tensor or value and what was
expected. The CLI prints it and exits 2; it never shows a traceback.
"""

from __future__ import annotations

import re
from typing import Optional


class InputError(Exception):
    """Bad user input: a one-line message, exit code 2, no traceback."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ParameterError(InputError):
    """A bad value for a parameter of an engine call, named as Python spells it:
    `gamma=0: expected at least 1 proposal per round`. The CLI re-words it with the flag
    that set the parameter (dflash_tui/cli.py, user_message)."""

    def __init__(self, name: str, value: object, problem: str):
        self.name, self.value, self.problem = name, value, problem
        super().__init__(f"{name}={value!r}: {problem}")


class GroupError(Exception):
    """A distributed run that cannot go on: a rank ended or lost contact, or the ranks no
    longer agree on what they committed. One line naming the rank, exit code 1."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


# mlx's strict Module.load_weights names every tensor it lacks or did not expect, one per
# line after the count ("Missing 18 parameters: \nmodel.layers.4.mlp.up_proj.weight,\n...").
_STRICT_LOAD = re.compile(r"^(Missing|Received) (\d+) parameters(?: not in model)?: \n(.*?)\.?$",
                          re.S)


def strict_load_names(error: BaseException) -> Optional[tuple[str, int, str]]:
    """("Missing" or "Received", how many, the first name) of mlx's strict load error, for
    a one-line message that names the first tensor and counts the rest; None for any other
    error. Shared by the loaders of a model folder (target.py) and a GGUF (gguf.py)."""
    found = _STRICT_LOAD.match(str(error).strip())
    if not found:
        return None
    return found.group(1), int(found.group(2)), found.group(3).split(",")[0].strip()
