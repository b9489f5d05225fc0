"""Runs the parameterised notebooks headless (papermill), with strict parameter checks.

Each notebook in ``notebooks/`` has:
- a first code cell ``guard = ParameterGuard()``;
- a cell tagged ``parameters`` of plain ``name = literal`` assignments (the defaults), always including
  ``results_dir = ""`` (empty: the notebook makes its own ``results/<run-id>/``);
- right after it, ``params = guard.check(globals())``, which fails with a clear message on a parameter
  the notebook does not know or of the wrong type (papermill itself only warns);
- ``metadata.gsworkbench.smoke_parameters``: small parameters for the tests (nbval).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nbformat

from gsworkbench.results import REPO_ROOT, new_run_dir

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
KERNEL_NAME = "gsworkbench"


class ParameterError(ValueError):
    """A notebook parameter is unknown or of the wrong type."""


# ---- parameters ------------------------------------------------------------------------------


def parse_parameters_source(source: str) -> dict[str, Any]:
    """The ``name = literal`` assignments of a parameters cell, in order."""
    out: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = ast.literal_eval(node.value)
    return out


def _type_name(value: Any) -> str:
    return type(value).__name__


def coerce_parameter(name: str, default: Any, value: Any) -> Any:
    """``value`` checked against the type of ``default`` (an int is accepted for a float)."""
    if default is None or value is None and default is None:
        return value
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ParameterError(
            f"parameter {name!r} must be of type {_type_name(default)} (default {default!r}), "
            f"got {_type_name(value)} {value!r}"
        )
    return value


def validate_parameters(defaults: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overridden by ``given``; ParameterError on unknown names or wrong types."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ParameterError(f"unknown notebook parameter(s): {', '.join(unknown)}; known: {', '.join(defaults)}")
    out = dict(defaults)
    for name, value in given.items():
        out[name] = coerce_parameter(name, defaults[name], value)
    return out


def parse_cli_value(text: str) -> Any:
    """A ``-p name value`` string as YAML (``4096`` -> int, ``0.5`` -> float, ``full`` -> str)."""
    import yaml

    return yaml.safe_load(text)


def _parameters_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            return cell
    raise ParameterError("notebook has no cell tagged 'parameters'")


def notebook_defaults(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Default parameters of a notebook (its ``parameters`` cell)."""
    return parse_parameters_source(_parameters_cell(nbformat.read(path, as_version=4)).source)


def smoke_parameters(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The notebook's small test parameters (``metadata.gsworkbench.smoke_parameters``)."""
    nb = nbformat.read(path, as_version=4)
    return dict(nb.metadata.get("gsworkbench", {}).get("smoke_parameters", {}))


class ParameterGuard:
    """In-notebook check of injected parameters.

    Created in the cell before the parameters cell, it records the source of every cell the kernel
    runs next (IPython's ``pre_run_cell`` event, which fires under papermill and nbval alike).
    ``check(globals())`` runs after papermill's injected cell: the first recorded cell is the
    parameters cell (the defaults), any later ones were injected.
    """

    def __init__(self) -> None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython ships with every kernel
            get_ipython = None  # type: ignore[assignment]
        self._ip = get_ipython() if get_ipython is not None else None
        self._cells: list[str] = []
        if self._ip is not None:
            self._ip.events.register("pre_run_cell", self._record)

    def _record(self, info: Any) -> None:
        self._cells.append(info.raw_cell)

    def check(self, namespace: Mapping[str, Any]) -> dict[str, Any]:
        """The notebook's parameters (defaults + injected), validated; ParameterError otherwise."""
        if self._ip is None:
            raise RuntimeError("ParameterGuard needs an IPython kernel")
        self._ip.events.unregister("pre_run_cell", self._record)
        cells = self._cells[:-1]  # the last recorded cell is the one calling check()
        if not cells:
            raise RuntimeError("run the parameters cell between ParameterGuard() and guard.check()")
        defaults = parse_parameters_source(cells[0])
        injected: dict[str, Any] = {}
        for src in cells[1:]:
            injected.update({k: namespace[k] for k in parse_parameters_source(src) if k in namespace})
        return validate_parameters(defaults, injected)


# ---- running ---------------------------------------------------------------------------------


def list_notebooks(directory: str | os.PathLike[str] = NOTEBOOK_DIR) -> list[Path]:
    """The notebooks of the suite, in name order."""
    return sorted(Path(directory).glob("[0-9][0-9]_*.ipynb"))


def kernel_name() -> str:
    """The project's kernel when registered (``make setup`` does), else ``python3``."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL_NAME if KERNEL_NAME in KernelSpecManager().find_kernel_specs() else "python3"


def run_notebook(
    path: str | os.PathLike[str],
    parameters: Mapping[str, Any] | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    *,
    prepare_only: bool = False,
    progress: bool = False,
) -> Path:
    """Executes one notebook with checked parameters; returns the executed copy's path.

    Its tables and plots go to ``run_dir`` (a new ``results/<run-id>/`` when None).
    """
    import papermill as pm

    path = Path(path)
    params = validate_parameters(notebook_defaults(path), dict(parameters or {}))
    run_dir = Path(run_dir) if run_dir is not None else new_run_dir(path.stem)
    run_dir.mkdir(parents=True, exist_ok=True)
    params["results_dir"] = str(run_dir)
    out = run_dir / path.name
    pm.execute_notebook(
        str(path),
        str(out),
        parameters=params,
        kernel_name=kernel_name(),
        cwd=str(path.parent),
        prepare_only=prepare_only,
        progress_bar=progress,
    )
    return out


def run_all(
    smoke: bool = False, root: str | os.PathLike[str] | None = None, notebooks: list[Path] | None = None
) -> tuple[Path, list[tuple[Path, str]]]:
    """Runs every notebook into one run folder; returns it and (notebook, status) pairs."""
    from gsworkbench.results import write_metadata

    run_dir = new_run_dir("suite-smoke" if smoke else "suite", root)
    statuses: list[tuple[Path, str]] = []
    chosen = notebooks if notebooks is not None else list_notebooks()
    write_metadata(run_dir, {"notebooks": [p.name for p in chosen], "smoke": smoke})
    for nb in chosen:
        params = smoke_parameters(nb) if smoke else {}
        sub = run_dir / nb.stem
        try:
            run_notebook(nb, params, sub)
            statuses.append((nb, "ok"))
        except Exception as err:  # keep going: one failing notebook must not lose the others
            statuses.append((nb, f"FAILED: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"))
    return run_dir, statuses


def prepare_smoke(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Writes each notebook with its smoke parameters injected (not executed) for nbval."""
    out_dir = Path(out_dir)
    out = []
    for nb in list_notebooks():
        out.append(run_notebook(nb, smoke_parameters(nb), out_dir / nb.stem, prepare_only=True))
    return out
