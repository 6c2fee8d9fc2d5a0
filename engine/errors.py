"""The one error type a user sees.

Anything wrong with what the user gave us (a path, a checkpoint, a value) is raised as an
InputError whose message is a single line naming the file, tensor or value and what was
expected. The CLI prints it and exits 2; it never shows a traceback.
"""

from __future__ import annotations


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
