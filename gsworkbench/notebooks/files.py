"""The notebook files: ``notebooks/NN_name.py`` (jupytext percent format, the reviewed source) and the
``NN_name.ipynb`` generated from it (no outputs, cell ids ``cell-00``...), kept in step by
:func:`sync_notebooks` (``gsworkbench sync-notebooks``; ``--check`` only compares)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat

from gsworkbench.notebooks.parameters import ParameterError, parse_parameters_source, parse_rules_source
from gsworkbench.results import REPO_ROOT

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
PATTERN = "[0-9][0-9]_*"


def list_notebooks(directory: str | os.PathLike[str] = NOTEBOOK_DIR) -> list[Path]:
    """The notebooks of the suite (``NN_*.ipynb``), in name order."""
    return sorted(Path(directory).glob(PATTERN + ".ipynb"))


def list_scripts(directory: str | os.PathLike[str] = NOTEBOOK_DIR) -> list[Path]:
    """The notebook sources (``NN_*.py``), in name order."""
    return sorted(Path(directory).glob(PATTERN + ".py"))


def notebook_from_script(path: str | os.PathLike[str]) -> nbformat.NotebookNode:
    """The notebook a percent-format script describes, with deterministic cell ids."""
    import jupytext

    nb = jupytext.read(Path(path), fmt="py:percent")
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    nbformat.validate(nb)
    return nb


def script_text_as_ipynb(path: str | os.PathLike[str]) -> str:
    """The exact ``.ipynb`` text generated from the script at ``path``."""
    return nbformat.writes(notebook_from_script(path)) + "\n"


def load_notebook(path: str | os.PathLike[str]) -> nbformat.NotebookNode:
    """A notebook from an ``.ipynb`` file or a percent-format ``.py`` script; ValueError if missing."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"notebook not found: {path}")
    if path.suffix == ".py":
        return notebook_from_script(path)
    if path.suffix != ".ipynb":
        raise ValueError(f"not a notebook (.ipynb or percent-format .py): {path}")
    try:
        return nbformat.read(path, as_version=4)
    except Exception as err:  # nbformat raises several kinds for a corrupt file
        raise ValueError(f"cannot read notebook {path}: {err}") from None


def _code_cells(nb: nbformat.NotebookNode) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


def parameters_cell(nb: nbformat.NotebookNode) -> Any:
    """The cell tagged ``parameters``; ParameterError if there is none."""
    for cell in _code_cells(nb):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return cell
    raise ParameterError("notebook has no cell tagged 'parameters'")


def notebook_defaults(path_or_nb: str | os.PathLike[str] | nbformat.NotebookNode) -> dict[str, Any]:
    """Default parameters of a notebook (its ``parameters`` cell)."""
    nb = path_or_nb if isinstance(path_or_nb, nbformat.NotebookNode) else load_notebook(path_or_nb)
    return parse_parameters_source(parameters_cell(nb).source)


def notebook_rules(path_or_nb: str | os.PathLike[str] | nbformat.NotebookNode) -> dict[str, dict[str, Any]]:
    """The parameter rules a notebook declares in its ``ParameterGuard(...)`` call (first code cell)."""
    nb = path_or_nb if isinstance(path_or_nb, nbformat.NotebookNode) else load_notebook(path_or_nb)
    code = _code_cells(nb)
    return parse_rules_source(code[0].source) if code else {}


def smoke_parameters(path_or_nb: str | os.PathLike[str] | nbformat.NotebookNode) -> dict[str, Any]:
    """The notebook's small test parameters (``metadata.gsworkbench.smoke_parameters``)."""
    nb = path_or_nb if isinstance(path_or_nb, nbformat.NotebookNode) else load_notebook(path_or_nb)
    return dict(nb.metadata.get("gsworkbench", {}).get("smoke_parameters", {}))


def sync_notebooks(directory: str | os.PathLike[str] = NOTEBOOK_DIR, *, check: bool = False) -> list[str]:
    """Writes each ``NN_*.ipynb`` from its ``NN_*.py``; with ``check``, writes nothing.

    Returns the problems found (with ``check``) or the files written: a notebook without its script,
    or one whose text differs from what its script generates.
    """
    from gsworkbench.results import atomic_write_text

    directory = Path(directory)
    report = []
    for nb_path in list_notebooks(directory):
        if not nb_path.with_suffix(".py").exists():
            report.append(f"{nb_path}: no source script {nb_path.with_suffix('.py').name}")
    for script in list_scripts(directory):
        target = script.with_suffix(".ipynb")
        text = script_text_as_ipynb(script)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if check:
            what = "missing" if current is None else "differs from"
            report.append(f"{target}: {what} what {script.name} generates")
        else:
            atomic_write_text(target, text)
            report.append(str(target))
    return report
