"""The JupyterLab round trip without a browser: each notebook opened, saved and re-read through
jupytext's contents manager (the one JupyterLab uses, synchronous and asynchronous) changes no file on
disk; a run's outputs and the kernel's metadata reach only the generated, git-ignored ``.ipynb``; an
edit shows in the ``.py`` as that edit and nothing else.

The notebooks are copied with the project's ``jupytext.toml`` into a temporary folder and their
``.ipynb`` generated there as ``make setup`` does, so the test does not depend on (or touch) the
checkout's own generated files.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from gsworkbench import jupyter as nbs
from gsworkbench.core.project import PACKAGE_CHECKOUT
from gsworkbench.jupyter import files

pytest.importorskip("jupyter_server")
jupytext = pytest.importorskip("jupytext")

SCRIPTS = files.list_scripts()


def _manager(root: Path, kind: str):
    """A jupytext contents manager on ``root`` that signs notebooks in memory (not in ~/.local)."""
    from nbformat.sign import NotebookNotary

    cls = jupytext.TextFileContentsManager if kind == "sync" else jupytext.AsyncTextFileContentsManager
    cm = cls(root_dir=str(root))
    cm.notary = NotebookNotary(db_file=":memory:")
    return cm


def _call(result):
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The project's jupytext.toml and notebook scripts, with their .ipynb generated as by `make setup`."""
    shutil.copy(PACKAGE_CHECKOUT / "jupytext.toml", tmp_path / "jupytext.toml")
    (tmp_path / "notebooks").mkdir()
    for script in SCRIPTS:
        shutil.copy(script, tmp_path / "notebooks" / script.name)
    written = files.sync_notebooks(tmp_path / "notebooks")
    assert len(written) == len(SCRIPTS)
    return tmp_path


def _untrusted(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook without the contents manager's ``trusted`` flags (a save signs it; not on disk)."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        cell.metadata.pop("trusted", None)
    return nb


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_the_project_pairs_the_notebooks_through_jupytext_toml():
    from jupytext.config import find_jupytext_configuration_file, load_jupytext_config

    assert find_jupytext_configuration_file(str(files.notebook_dir())) == str(PACKAGE_CHECKOUT / "jupytext.toml")
    config = load_jupytext_config(str(SCRIPTS[0]))
    assert config.default_formats(f"notebooks/{SCRIPTS[0].name}") == "notebooks///ipynb,notebooks///py:percent"
    assert config.default_formats("gsworkbench/core/figures.py") is None  # the package's modules are not paired


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("suffix", [".ipynb", ".py"])
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_open_and_save_changes_nothing(project, script, suffix, kind):
    """Open either file of the pair, save it unchanged, re-read it: every byte on disk as before."""
    before = _snapshot(project / "notebooks")
    cm = _manager(project, kind)
    path = f"notebooks/{script.stem}{suffix}"
    model = _call(cm.get(path))
    assert model["type"] == "notebook"
    _call(cm.save({"type": "notebook", "content": model["content"]}, path))
    again = _call(cm.get(path))
    assert _untrusted(again["content"]) == _untrusted(model["content"])
    after = _snapshot(project / "notebooks")
    changed = [name for name in before if after.get(name) != before[name]]
    assert not changed, f"saving {path} through jupytext changed {changed}"
    assert set(after) == set(before)  # and wrote no other file


def _as_if_run(nb: nbformat.NotebookNode) -> None:
    """What a kernel and JupyterLab add to a notebook that has been run."""
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.9", "mimetype": "text/x-python",
                                    "file_extension": ".py"}  # fmt: skip
    for k, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = k + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"output {k}\n")]
        cell.metadata["execution"] = {"iopub.status.busy": "2026-11-24T06:00:00.000000Z"}
        cell.metadata["scrolled"] = True


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_outputs_stay_in_the_generated_notebook(project, kind):
    """Run (simulated) and autosave: the .py keeps its bytes, the .ipynb holds the outputs, and the
    pair still counts as in step (the suite runs it without a `sync-notebooks`)."""
    script = project / "notebooks" / SCRIPTS[0].name
    text = script.read_bytes()
    cm = _manager(project, kind)
    path = f"notebooks/{script.stem}.ipynb"
    model = _call(cm.get(path))
    _as_if_run(model["content"])
    _call(cm.save({"type": "notebook", "content": model["content"]}, path))
    assert script.read_bytes() == text
    saved = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    assert any(c.get("outputs") for c in saved.cells) and "language_info" in saved.metadata
    assert files.inputs_match(script.with_suffix(".ipynb"), script)
    assert files.sync_notebooks(project / "notebooks", check=True) == []
    reopened = _call(cm.get(path))["content"]
    assert any(c.get("outputs") for c in reopened.cells)
    nbs.load_notebook(script.with_suffix(".ipynb"))  # not stale


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_edit_shows_as_that_edit_only(project, kind):
    """A changed parameter value is a one-line diff of the .py."""
    script = project / "notebooks" / SCRIPTS[0].name
    lines = script.read_text().splitlines()
    cm = _manager(project, kind)
    path = f"notebooks/{script.stem}.ipynb"
    model = _call(cm.get(path))
    cell = files.parameters_cell(model["content"])
    first = cell.source.splitlines()[0]
    name, _, value = first.partition(" = ")
    edited = f"{name} = {value}0" if value[0].isdigit() else f'{name} = "edited"'
    cell.source = cell.source.replace(first, edited, 1)
    _call(cm.save({"type": "notebook", "content": model["content"]}, path))
    new = script.read_text().splitlines()
    assert len(new) == len(lines)
    assert [(a, b) for a, b in zip(lines, new) if a != b] == [(first, edited)]


def test_the_scripts_are_as_jupytext_writes_them():
    """Each tracked .py is jupytext's own text of its notebook (header keys sorted, block-style lists,
    the text_representation block), so a save by jupytext is a no-op."""
    for script in SCRIPTS:
        nb = jupytext.read(script, fmt="py:percent")
        assert files.as_script_text(nb, script) == script.read_text(encoding="utf-8"), (
            f"{script.name} is not in jupytext's form: `jupytext --to py:percent {script.name}` rewrites it"
        )


def test_generated_notebooks_are_not_tracked():
    """The .ipynb are build outputs: git-ignored and not in the index (the .py are the tracked source)."""
    if not (PACKAGE_CHECKOUT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    git = ["git", "-C", str(PACKAGE_CHECKOUT)]
    tracked = subprocess.run([*git, "ls-files", "notebooks"], capture_output=True, text=True, check=True).stdout
    assert not [p for p in tracked.split() if p.endswith(".ipynb")], "git rm --cached notebooks/*.ipynb"
    probe = "notebooks/" + SCRIPTS[0].with_suffix(".ipynb").name
    ignored = subprocess.run([*git, "check-ignore", "-q", "--no-index", probe])
    assert ignored.returncode == 0, f"{probe} is not git-ignored"


def test_generated_notebooks_carry_the_kernels_language_info():
    """JupyterLab writes the kernel's language_info into a notebook when the kernel connects; a notebook
    without it opens marked modified (seen in JupyterLab 4 in headless Chromium). The generated ones
    carry it, and the paired script leaves it out."""
    from ipykernel.ipkernel import IPythonKernel

    from gsworkbench.jupyter.files import list_scripts, notebook_from_script

    for script in list_scripts():
        nb = notebook_from_script(script)
        assert nb.metadata["language_info"] == IPythonKernel.language_info, script
        assert "language_info" not in script.read_text(), script
