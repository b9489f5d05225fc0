"""The project folder: the checkout whose ``notebooks/`` and ``results/`` a command uses.

It is found from the working folder, not from where the package is installed, so a second clone that
shares the environment uses its own notebooks and results. In order:

1. ``$GSW_PROJECT_DIR`` (must be a project folder);
2. the nearest folder, from the working folder upwards, that holds a ``pyproject.toml`` naming the
   ``gsworkbench`` project and a ``notebooks/`` folder;
3. the checkout of the imported package (a one-line note on stderr says so, once).

``$GSW_RESULTS_DIR`` overrides the results folder alone.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import tomllib

PROJECT_ENV = "GSW_PROJECT_DIR"
RESULTS_ENV = "GSW_RESULTS_DIR"
PROJECT_NAME = "gsworkbench"
PACKAGE_CHECKOUT = Path(__file__).resolve().parents[2]
_noted_fallback = False


@dataclass(frozen=True)
class ProjectDir:
    """A project folder and how it was found (``source``: a short phrase for messages)."""

    path: Path
    source: str

    def describe(self) -> str:
        """One line for a command's output: the folder and how it was chosen."""
        return f"{self.path} ({self.source})"


def is_project_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a ``pyproject.toml`` whose ``[project] name`` is gsworkbench and a
    ``notebooks/`` folder."""
    path = Path(path)
    if not (path / "notebooks").is_dir():
        return False
    try:
        with open(path / "pyproject.toml", "rb") as f:
            return tomllib.load(f).get("project", {}).get("name") == PROJECT_NAME
    except (OSError, tomllib.TOMLDecodeError):
        return False


def find_project(start: str | os.PathLike[str] | None = None) -> ProjectDir:
    """The project folder for a command run in ``start`` (default: the working folder); see the module
    docstring for the order. A ``$GSW_PROJECT_DIR`` that is not a project folder is a ValueError."""
    given = os.environ.get(PROJECT_ENV)
    if given:
        path = Path(given).expanduser().resolve()
        if not is_project_dir(path):
            raise ValueError(f"{PROJECT_ENV}={given}: not a gsworkbench project folder "
                             f"(no pyproject.toml naming {PROJECT_NAME} beside a notebooks/ folder)")  # fmt: skip
        return ProjectDir(path, f"from ${PROJECT_ENV}")
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_project_dir(folder):
            return ProjectDir(folder, "the project above the working folder")
    return ProjectDir(PACKAGE_CHECKOUT, f"no project folder above {here}: the installed package's checkout")


def project_dir() -> Path:
    """The project folder's path (:func:`find_project`); the fallback to the package's checkout is noted
    once on stderr."""
    global _noted_fallback
    found = find_project()
    if found.source.startswith("no project") and not _noted_fallback:
        _noted_fallback = True
        print(f"gsworkbench: note: project folder {found.describe()}", file=sys.stderr)
    return found.path


def notebook_dir() -> Path:
    """``<project>/notebooks``: the notebook sources and their generated ``.ipynb``."""
    return project_dir() / "notebooks"


def results_root() -> Path:
    """``$GSW_RESULTS_DIR``, or ``<project>/results``: where run folders go."""
    given = os.environ.get(RESULTS_ENV)
    return Path(given).expanduser() if given else project_dir() / "results"


def results_source() -> str:
    """One line naming the results folder and how it was chosen (for commands to print)."""
    if os.environ.get(RESULTS_ENV):
        return f"{results_root()} (from ${RESULTS_ENV})"
    return f"{results_root()} (in the project folder {find_project().describe()})"
