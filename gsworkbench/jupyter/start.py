"""The first lines of every notebook's run: its folder, its metadata, its seed and a link to it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gsworkbench.core.runs import new_run_dir, write_metadata
from gsworkbench.jupyter.display import result_link


def start_run(name: str, params: Mapping[str, Any], *, seed: int | None = None, show: bool = True) -> Path:
    """Starts a notebook's run and returns its folder.

    The folder is ``params["results_dir"]`` when a runner gave one, else a new ``results/<run-id>/``
    named after ``name`` (the notebook's stem); ``metadata.json`` there records ``params`` and the
    environment. ``seed``, when given, seeds torch's global generator. With ``show``, a link to the
    folder is displayed (relative to the showing notebook, :func:`result_link`).
    """
    if "results_dir" not in params:
        raise ValueError(f"{name}: the notebook's parameters lack results_dir (every notebook has results_dir = \"\")")
    results_dir = params["results_dir"]
    run_dir = Path(results_dir) if results_dir else new_run_dir(name)
    write_metadata(run_dir, params)
    if seed is not None:
        import torch

        torch.manual_seed(seed)
    if show:
        from IPython.display import display

        display(result_link(run_dir, results_dir, "results"))
    return run_dir
