"""The notebook files: ``notebooks/NN_name.py`` (jupytext percent format, the tracked source) and the
``NN_name.ipynb`` generated from it (git-ignored), kept in step by :func:`sync_notebooks`
(``gsworkbench sync-notebooks``; ``--check`` only compares; ``make setup`` runs it).

The pair follows jupytext's own conventions (``jupytext.toml`` at the repository root pairs
``notebooks///ipynb`` with ``notebooks///py:percent``): the ``.py`` holds the inputs and its YAML header
is what jupytext writes; the ``.ipynb`` is what jupytext's contents manager saves beside it (no
``text_representation`` metadata). So opening and saving a notebook in JupyterLab leaves the ``.py``
byte for byte as it was, and the ``.ipynb`` may gain outputs without touching a tracked file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat

from gsworkbench.core.atomic import atomic_write_text
from gsworkbench.core.project import notebook_dir
from gsworkbench.jupyter.parameters import ParameterError, parse_parameters_source, parse_rules_source

PATTERN = "[0-9][0-9]_*"
TEXT_FORMAT = "py:percent"
SYNC_HINT = "run `make setup` or `gsworkbench sync-notebooks`"


class NotebookNotGenerated(ValueError):
    """A script's ``.ipynb`` is missing, or no longer matches the script (stale)."""


def list_scripts(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """The notebook sources (``NN_*.py``) in ``directory`` (default: the project's, :func:`notebook_dir`),
    in name order."""
    return sorted(Path(directory if directory is not None else notebook_dir()).glob(PATTERN + ".py"))


def list_notebooks(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """The notebooks of the suite (``NN_*.ipynb``: one per script, and any without one) in ``directory``
    (default: the project's), in name order.

    NotebookNotGenerated (a ValueError) when a script's ``.ipynb`` has not been generated yet.
    """
    directory = Path(directory if directory is not None else notebook_dir())
    paths = set(directory.glob(PATTERN + ".ipynb")) | {s.with_suffix(".ipynb") for s in list_scripts(directory)}
    missing = sorted(p.name for p in paths if not p.exists())
    if missing:
        raise NotebookNotGenerated(f"notebooks not generated from their .py sources: {', '.join(missing)} "
                                   f"in {directory}; {SYNC_HINT}")  # fmt: skip
    return sorted(paths)


def _jupytext_config(path: Path) -> Any:
    """The project's jupytext configuration (``jupytext.toml``) that applies to ``path``, or None."""
    from jupytext.config import load_jupytext_config

    return load_jupytext_config(str(path.resolve()))


def notebook_from_script(path: str | os.PathLike[str]) -> nbformat.NotebookNode:
    """The notebook a percent-format script describes, as jupytext's contents manager writes it to the
    paired ``.ipynb`` (no ``jupytext.text_representation``), with deterministic cell ids."""
    import jupytext

    nb = jupytext.read(Path(path), fmt=TEXT_FORMAT)
    meta = nb.metadata.get("jupytext", {})
    meta.pop("text_representation", None)
    if not meta:
        nb.metadata.pop("jupytext", None)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    nb.metadata["language_info"] = kernel_language_info()
    nbformat.validate(nb)
    return nb


def kernel_language_info() -> dict[str, Any]:
    """The ``language_info`` that this environment's ipykernel reports. JupyterLab writes it into a
    notebook when its kernel connects; a notebook generated with it opens unmodified (without it, the
    tab is marked modified at once and closing asks to save). The paired script leaves it out."""
    from ipykernel.ipkernel import IPythonKernel

    return json.loads(json.dumps(IPythonKernel.language_info))


def script_text_as_ipynb(path: str | os.PathLike[str]) -> str:
    """The exact ``.ipynb`` text generated from the script at ``path``."""
    return nbformat.writes(notebook_from_script(path)) + "\n"


def as_script_text(nb: nbformat.NotebookNode, near: str | os.PathLike[str]) -> str:
    """The percent-format text jupytext writes for ``nb`` (with the configuration that applies at
    ``near``): the notebook's inputs, without outputs or the metadata the header leaves out."""
    import jupytext

    return jupytext.writes(nb, fmt=TEXT_FORMAT, config=_jupytext_config(Path(near)))


def inputs_match(notebook: str | os.PathLike[str], script: str | os.PathLike[str]) -> bool:
    """Whether the ``.ipynb`` has the inputs of the script: both give the same script text. Outputs,
    execution counts, the kernel's ``language_info`` do not count."""
    import jupytext

    try:
        nb = nbformat.read(Path(notebook), as_version=4)
    except Exception:  # nbformat raises several kinds for a corrupt file
        return False
    src = jupytext.read(Path(script), fmt=TEXT_FORMAT)
    return as_script_text(nb, script) == as_script_text(src, script)


def _paired_script(path: Path) -> Path | None:
    script = path.with_suffix(".py")
    return script if path.match(PATTERN + ".ipynb") and script.is_file() else None


def load_notebook(path: str | os.PathLike[str]) -> nbformat.NotebookNode:
    """A notebook from an ``.ipynb`` file or a percent-format ``.py`` script; ValueError if missing, and
    NotebookNotGenerated when a generated ``NN_*.ipynb`` is missing or older than its script's inputs."""
    path = Path(path)
    if not path.is_file():
        if path.suffix == ".ipynb" and path.match(PATTERN + ".ipynb") and path.with_suffix(".py").is_file():
            raise NotebookNotGenerated(f"notebook {path} is not generated from {path.with_suffix('.py').name} yet; "
                                       f"{SYNC_HINT}")  # fmt: skip
        raise ValueError(f"notebook not found: {path}")
    if path.suffix == ".py":
        return notebook_from_script(path)
    if path.suffix != ".ipynb":
        raise ValueError(f"not a notebook (.ipynb or percent-format .py): {path}")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:  # nbformat raises several kinds for a corrupt file
        raise ValueError(f"cannot read notebook {path}: {err}") from None
    script = _paired_script(path)
    if script is not None and not inputs_match(path, script):
        raise NotebookNotGenerated(f"notebook {path} is stale: {script.name} has changed since; {SYNC_HINT}")
    return nb


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


def _updated_text(script: Path, target: Path) -> str:
    """The script's notebook with the outputs of the current ``target`` kept where its cells still match
    (jupytext's own combination of inputs and outputs)."""
    from jupytext.combine import combine_inputs_with_outputs

    try:
        old = nbformat.read(target, as_version=4)
    except Exception:  # unreadable: start again from the script
        return script_text_as_ipynb(script)
    nb = combine_inputs_with_outputs(notebook_from_script(script), old, fmt=TEXT_FORMAT)
    return nbformat.writes(nb) + "\n"


def sync_notebooks(directory: str | os.PathLike[str] | None = None, *, check: bool = False) -> list[str]:
    """Writes each ``NN_*.ipynb`` in ``directory`` (default: the project's, :func:`notebook_dir`) whose
    inputs differ from its ``NN_*.py`` (or that is missing); with ``check``, writes nothing. A notebook
    already in step is left as it is (outputs included); a stale one gets the script's inputs and keeps
    the outputs of the cells that did not change.

    Returns the problems found (with ``check``) or the files written: a notebook without its script,
    a missing notebook, or one whose inputs differ from its script's.
    """
    directory = Path(directory if directory is not None else notebook_dir())
    report = []
    for nb_path in sorted(directory.glob(PATTERN + ".ipynb")):
        if not nb_path.with_suffix(".py").exists():
            report.append(f"{nb_path}: no source script {nb_path.with_suffix('.py').name}")
    for script in list_scripts(directory):
        target = script.with_suffix(".ipynb")
        if target.exists() and inputs_match(target, script):
            continue
        if check:
            what = "missing" if not target.exists() else "differs from"
            report.append(f"{target}: {what} what {script.name} generates")
        else:
            text = _updated_text(script, target) if target.exists() else script_text_as_ipynb(script)
            atomic_write_text(target, text)
            report.append(str(target))
    return report
