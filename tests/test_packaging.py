"""What an install ships: every data file the code reads at run time (the bundled drafter,
the trainer's prompt word lists) is package data of a package the distribution lists, so a
wheel carries it (docs/ARCHITECTURE.md, "Layers"). Read from the two pyproject.toml files
as setuptools reads them, against the files in the checkout."""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


def shipped_data(project: Path) -> tuple[set[str], dict[str, list[str]], dict[str, str]]:
    config = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(config["packages"]), config.get("package-data", {}), config.get("package-dir", {})


def package_folder(project: Path, package: str, package_dir: dict[str, str]) -> Path:
    """Where setuptools finds a package: its own package-dir entry, or its nearest mapped
    parent's folder plus the rest of its name."""
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        mapped = package_dir.get(".".join(parts[:cut]))
        if mapped is not None:
            return project.joinpath(mapped, *parts[cut:])
    return project.joinpath(*parts)


@pytest.mark.parametrize("project, data_package", [
    (ROOT, "dflash_tui.sample"),
    (ROOT / "distill", "dflash_tui_distill.prompt_data"),
])
def test_every_data_file_is_shipped_by_a_listed_package(project, data_package):
    packages, package_data, package_dir = shipped_data(project)
    assert data_package in packages  # a folder setuptools would otherwise warn of and drop
    folder = package_folder(project, data_package, package_dir)
    files = [p.name for p in folder.iterdir() if p.is_file()]
    assert files, f"{folder} holds no files"
    patterns = package_data.get(data_package, [])
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert unshipped == [], f"not in {data_package}'s package-data: {unshipped}"
