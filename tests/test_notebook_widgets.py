"""Headless runs never wait on a widget cell: the runner's kernels make no widget (``GSW_HEADLESS``), and
its client goes on when a finished cell's reply never comes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import nbformat
import pytest

from gsworkbench import jupyter as nbs
from tests.conftest import ext_built

HANG_GUARD_S = 600  # far beyond any healthy run: only a hung client gets there

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _camera_cell() -> str:
    """Notebook 03's last code cell: the interactive camera (ipywidgets) over its static default view."""
    nb = nbs.load_notebook(nbs.notebook_dir() / "03_rendering.py")
    source = [c.source for c in nb.cells if c.cell_type == "code"][-1]
    assert "widgets.interactive(" in source
    return source


def _run(code: str, *args: object, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    """Runs ``code`` (with ``args``) in a fresh Python; a run past ``timeout`` seconds has hung and fails
    the test."""
    cmd = [sys.executable, "-c", code, *map(str, args)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the headless run hung ({timeout} s); its stderr so far:\n{err.stderr}")


def test_the_camera_cell_runs_headless_many_times(tmp_path):
    """Notebook 03's camera cell, 25 times in one kernel through the runner: every run ends, each cell
    shows the static default view and creates no widget."""
    repeats = 25
    backend = "ext" if ext_built() else "torch"
    setup = textwrap.dedent(f"""\
        from pathlib import Path
        import matplotlib.pyplot as plt
        import torch
        from gsworkbench.jupyter.display import headless
        from gsworkbench.core.figures import save_figure
        from gsworkbench.splat import rasterize
        from gsworkbench.core.splats import synthetic_splats
        width, height, sh_degree, backend = 32, 24, 1, {backend!r}
        scene = synthetic_splats(200, sh_degree, seed=0)
        run_dir = Path(results_dir)
    """)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('results_dir = ""')
    params.metadata["tags"] = ["parameters"]
    camera = _camera_cell()
    nb.cells = [params, nbformat.v4.new_code_cell(setup)] + [nbformat.v4.new_code_cell(camera) for _ in range(repeats)]
    path = tmp_path / "95_widgets.ipynb"
    nbformat.write(nb, path)
    out = _run(f"from gsworkbench.jupyter import run_notebook; run_notebook({str(path)!r}, {{}}, "
               f"{str(tmp_path / 'run')!r}, progress=True)")  # fmt: skip
    assert out.returncode == 0, out.stderr
    executed = nbformat.read(tmp_path / "run" / path.name, as_version=4)
    cells = [c for c in executed.cells if c.source == camera]
    assert len(cells) == repeats
    for cell in cells:
        kinds = {k for o in cell.outputs for k in o.get("data", {})}
        assert "image/png" in kinds and WIDGET_VIEW not in kinds
        assert "run headless: no sliders" in "".join(o.get("text", "") for o in cell.outputs)


# A client that loses the execute_reply of every cell marked "# lose-reply", as nbclient sometimes
# does with a widget cell: without the watchdog the run waits for it forever.
LOSING_CLIENT = """\
import sys
from nbclient.util import run_sync
from gsworkbench.jupyter import progress, run_notebook

class LosingClient(progress.WatchedClient):
    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        execute, get_msg, lost = kc.execute, kc.shell_channel.get_msg, set()

        def execute_marked(code, *args, **kwargs):
            msg_id = execute(code, *args, **kwargs)
            if "# lose-reply" in code:
                lost.add(msg_id)
            # a reply that never comes is given up on soon; a real one gets the runner's grace, so a busy
            # machine that delivers it late cannot make it look lost
            self.reply_grace = 0.5 if msg_id in lost else progress.WatchedClient.reply_grace
            return msg_id

        async def get_unmarked(*args, **kwargs):
            while True:
                msg = await get_msg(*args, **kwargs)
                if msg["parent_header"].get("msg_id") not in lost:
                    return msg

        kc.execute, kc.shell_channel.get_msg = execute_marked, get_unmarked
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

progress.WatchedClient = LosingClient
try:
    run_notebook(sys.argv[1], {}, sys.argv[2], progress=PROGRESS)
except Exception as err:
    print(f"raised {type(err).__name__}: {err}", file=sys.stderr)
    sys.exit(1)
"""


def _losing_notebook(path, failing: bool) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('results_dir = ""')
    params.metadata["tags"] = ["parameters"]
    lost = "x = 2  # lose-reply" + ("\nraise ValueError('bad widget')" if failing else "")
    nb.cells = [params, nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(lost),
                nbformat.v4.new_code_cell("print('x is', x)")]  # fmt: skip
    nbformat.write(nb, path)


@pytest.mark.parametrize("progress", [True, False])
def test_a_lost_reply_is_reported_in_one_line_and_the_run_goes_on(tmp_path, progress):
    path = tmp_path / "94_lost.ipynb"
    _losing_notebook(path, failing=False)
    code = LOSING_CLIENT.replace("PROGRESS", str(progress))
    out = _run(code, path, tmp_path / "run")
    assert out.returncode == 0, out.stderr
    said = [ln for ln in out.stderr.splitlines() if "reply never came" in ln]
    assert said == ["gsworkbench: cell 3/4 finished (the kernel went idle) but its reply never came; going on "
                    "with its outputs"]  # fmt: skip
    executed = nbformat.read(tmp_path / "run" / path.name, as_version=4)
    assert "x is 2" in executed.cells[-1].outputs[0]["text"]


def test_a_lost_reply_of_a_failing_cell_still_fails_the_run(tmp_path):
    path = tmp_path / "93_lost_error.ipynb"
    _losing_notebook(path, failing=True)
    code = LOSING_CLIENT.replace("PROGRESS", "False")
    out = _run(code, path, tmp_path / "run")
    assert out.returncode == 1
    assert "raised NotebookFailed" in out.stderr and "ValueError: bad widget" in out.stderr
    assert "cell 3: x = 2  # lose-reply" in out.stderr
