"""Running notebooks headless (papermill): checked parameters, progress, a short failure report."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gsworkbench.core.interrupt import deferred_interrupt, signal_name
from gsworkbench.core.runs import LOCK_NAME, new_run_dir, run_lock, write_metadata
from gsworkbench.jupyter.files import (
    list_notebooks,
    load_notebook,
    notebook_defaults,
    notebook_rules,
    smoke_parameters,
)
from gsworkbench.jupyter.parameters import validate_parameters
from gsworkbench.jupyter.progress import ENGINE_NAME, CellProgress, KernelDied, first_line, interrupt_kernels

KERNEL_NAME = "gsworkbench"


@dataclass
class NotebookFailed(Exception):
    """A cell of a notebook raised; ``str()`` is the short report, ``traceback`` the full one."""

    notebook: Path
    cell_number: int  # 1-based, counting every cell of the source notebook (markdown included)
    cell_line: str
    ename: str
    evalue: str
    executed: Path  # the partly executed notebook
    traceback: list[str] = field(default_factory=list, repr=False)

    def __str__(self) -> str:
        evalue = "\n    ".join(self.evalue.strip().splitlines()[:6])
        return (
            f"notebook {self.notebook} failed\n"
            f"  cell {self.cell_number}: {self.cell_line}\n"
            f"  {self.ename}: {evalue}\n"
            f"  partly executed notebook: {self.executed}"
        )


class NotebookInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM: ``signum``) stopped a notebook run; ``str()`` is one line: where it stopped,
    what the cell kept (e.g. a training run's files) and the partly executed notebook."""

    def __init__(
        self, notebook: Path, cell_number: int | None, said: str, executed: Path, signum: int = signal.SIGINT
    ) -> None:
        where = f"in cell {cell_number}" if cell_number else "between cells"
        by = "" if signum == signal.SIGINT else f" by {signal_name(signum)}"
        said = f": {said}" if said else ""
        super().__init__(f"notebook {notebook} interrupted{by} {where}{said}; partly executed notebook: {executed}")
        self.notebook, self.cell_number, self.executed, self.signum = notebook, cell_number, executed, signum

    def __str__(self) -> str:
        return str(self.args[0])


class NotebookKernelDied(RuntimeError):
    """The kernel died under a notebook run (the OOM killer, kill -9, a crash); ``str()`` is one line:
    the cell, how the kernel ended, what the run folder kept and how to go on."""

    def __init__(self, notebook: Path, died: KernelDied, run_dir: Path, executed: Path, resume: bool) -> None:
        status = died.exit_status
        if status is not None and status < 0:
            how = f"killed by {signal_name(-status)}" + (": out of memory, or kill -9" if -status == 9 else "")
        else:
            how = "exit status unknown" if status is None else f"exit status {status}"
        kept = sorted(p.name for p in run_dir.iterdir() if p.is_file() and p.name not in (executed.name, LOCK_NAME))
        said = f"kept {', '.join(kept)} in {run_dir}" if kept else f"nothing kept in {run_dir}"
        go_on = ""
        if resume and (run_dir / "checkpoint.pt").is_file():
            go_on = f"; to go on: gsworkbench run {notebook} -p resume {run_dir} (and the same -p as before)"
        super().__init__(f"notebook {notebook}: the kernel died in {died.label} ({how}); {said}{go_on}; "
                         f"partly executed notebook: {executed}")  # fmt: skip
        self.notebook, self.exit_status, self.executed = notebook, status, executed


@contextlib.contextmanager
def _trusted(executed: Path, sign: bool) -> Iterator[None]:
    """Once the run ends (finished, failed or interrupted), signs the executed notebook as trusted for
    this user's Jupyter, as Jupyter does with the outputs of cells run in its own UI. JupyterLab then
    renders its HTML outputs (the inline, interactive flamegraphs of notebook 04) instead of sanitising
    an untrusted notebook's SVG down to its text. Without a usable signature store it stays untrusted."""
    try:
        yield
    finally:
        if sign and executed.is_file():
            import sqlite3

            import nbformat
            from nbformat.sign import NotebookNotary

            with contextlib.suppress(OSError, sqlite3.Error, ValueError):
                NotebookNotary().sign(nbformat.read(executed, as_version=4))


def kernel_name() -> str:
    """The project's kernel when registered (``make setup`` does), else ``python3``."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KERNEL_NAME if KERNEL_NAME in KernelSpecManager().find_kernel_specs() else "python3"


def check_parameters(path: str | os.PathLike[str], parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The notebook's parameters with ``parameters`` applied, checked against their types and rules
    (ParameterError otherwise); relative paths of ``path`` parameters made absolute."""
    nb = load_notebook(path)
    rules = notebook_rules(nb)
    params = validate_parameters(notebook_defaults(nb), dict(parameters or {}), rules)
    for name, rule in rules.items():
        if rule.get("path") and params[name]:
            params[name] = str(Path(params[name]).resolve())  # the kernel runs in the notebook's folder
    return params


def _failure(err: Any, source_nb: Any, path: Path, out: Path) -> NotebookFailed:
    sources = [c.source for c in source_nb.cells]
    number = sources.index(err.source) + 1 if err.source in sources else err.cell_index + 1
    return NotebookFailed(path, number, first_line(err.source, 80), err.ename, str(err.evalue), out, err.traceback)


def run_notebook(
    path: str | os.PathLike[str],
    parameters: Mapping[str, Any] | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    *,
    prepare_only: bool = False,
    progress: bool = False,
) -> Path:
    """Executes one notebook (``.ipynb`` or percent-format ``.py``) with checked parameters; returns
    the executed copy's path. Its tables and plots go to ``run_dir`` (a new ``results/<run-id>/``
    when None), which the run holds for itself (:func:`gsworkbench.core.runs.run_lock`: another run into
    it is a ValueError naming that run's process). Bad parameters, or a run folder that cannot be
    written, raise a ValueError (ParameterError) before any kernel starts; a failing cell raises
    :class:`NotebookFailed`, a dying kernel :class:`NotebookKernelDied`, Ctrl-C or SIGTERM
    :class:`NotebookInterrupted`.
    """
    path = Path(path)
    params = check_parameters(path, parameters)
    source_nb = load_notebook(path)
    asked = (parameters or {}).get("results_dir")  # -p results_dir DIR: the same as --out DIR
    if asked:
        if run_dir is not None and Path(asked).resolve() != Path(run_dir).resolve():
            raise ValueError(f"results_dir {asked} and the run folder {run_dir} (--out) differ: give one of them")
        run_dir = asked
    # absolute: the kernel runs in the notebook's folder, where a relative --out would point elsewhere
    run_dir = Path(run_dir).resolve() if run_dir is not None else new_run_dir(path.stem)
    with run_lock(run_dir):
        return _execute(path, source_nb, params, run_dir, prepare_only, progress)


def _execute(
    path: Path, source_nb: Any, params: dict[str, Any], run_dir: Path, prepare_only: bool, progress: bool
) -> Path:
    import papermill as pm

    params["results_dir"] = str(run_dir)
    out = run_dir / (path.stem + ".ipynb")
    extra: dict[str, Any] = {}
    if progress and not prepare_only:
        extra["progress"] = CellProgress()
    # the first Ctrl-C goes to the kernel (its own session: a terminal's Ctrl-C does not reach it), whose
    # cell stops as Ctrl-C stops it in Jupyter (a training run saves its work); no further cell starts
    with deferred_interrupt(interrupt_kernels) as interrupted, _trusted(out, not prepare_only):
        try:
            pm.execute_notebook(
                source_nb,
                str(out),
                parameters=params,
                kernel_name=kernel_name(),
                cwd=str(path.resolve().parent),
                prepare_only=prepare_only,
                progress_bar=False,
                engine_name=ENGINE_NAME,
                stop=interrupted,
                **extra,
            )
        except pm.PapermillExecutionError as err:
            failure = _failure(err, source_nb, path, out)
            if interrupted() or err.ename in ("KeyboardInterrupt", "TrainingInterrupted"):
                said = (str(err.evalue).strip().splitlines() or [""])[0]
                if err.ename == "TrainingInterrupted" and "resume" in notebook_rules(source_nb):
                    said += f"; to go on: gsworkbench run {path} -p resume {run_dir} (and the same -p as before)"
                raise NotebookInterrupted(path, failure.cell_number, said, out, _signum(interrupted)) from None
            raise failure from None
        except KernelDied as died:
            raise NotebookKernelDied(path, died, run_dir, out, "resume" in notebook_rules(source_nb)) from None
        if interrupted():
            raise NotebookInterrupted(path, None, "", out, _signum(interrupted))
    return out


def _signum(interrupted: Any) -> int:
    """The signal that stopped a run (SIGINT when none was caught here: the kernel's own Ctrl-C)."""
    return interrupted.signum if interrupted.signum is not None else signal.SIGINT


def run_all(
    smoke: bool = False, root: str | os.PathLike[str] | None = None, notebooks: list[Path] | None = None
) -> tuple[Path, list[tuple[Path, str]]]:
    """Runs every notebook into one run folder; returns it and (notebook, status) pairs."""
    run_dir = new_run_dir("suite-smoke" if smoke else "suite", root)
    statuses: list[tuple[Path, str]] = []
    chosen = notebooks if notebooks is not None else list_notebooks()
    write_metadata(run_dir, {"notebooks": [p.name for p in chosen], "smoke": smoke})
    for nb in chosen:
        params = smoke_parameters(nb) if smoke else {}
        try:
            run_notebook(nb, params, run_dir / nb.stem, progress=True)
            statuses.append((nb, "ok"))
        except NotebookFailed as err:  # keep going: one failing notebook must not lose the others
            message = (err.evalue.splitlines() or [""])[0]
            statuses.append((nb, f"FAILED in cell {err.cell_number}: {err.ename}: {message}"))
        except (ValueError, NotebookKernelDied) as err:
            statuses.append((nb, f"FAILED: {err}"))
    return run_dir, statuses


def prepare_smoke(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Writes each notebook with its smoke parameters injected (not executed) for nbval."""
    out_dir = Path(out_dir)
    return [
        run_notebook(nb, smoke_parameters(nb), out_dir / nb.stem, prepare_only=True) for nb in list_notebooks()
    ]
