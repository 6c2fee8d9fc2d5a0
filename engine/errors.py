"""The one error type a user sees.

Anything wrong with what the user gave us (a path, a checkpoint, a flag) is raised as an
InputError whose message is a single line naming the file, tensor or value and what was
expected. The CLI prints it and exits 2; it never shows a traceback.
"""


class InputError(Exception):
    """Bad user input: a one-line message, exit code 2, no traceback."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
