"""The shape every refusal has: exit code 2, one `dflash-tui: error:` line, no traceback."""

from __future__ import annotations

from dflash_tui.cli import main

PREFIX = "dflash-tui: error: "


def refusal(capsys, argv: list[str], *needles: str) -> str:
    """Run the CLI in this process on `argv`; check the refusal's shape and that its line
    holds every needle; return the line."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith(PREFIX)]
    assert code == 2, err
    assert len(errors) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]
