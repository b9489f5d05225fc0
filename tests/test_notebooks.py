"""Notebook parameters: parsing, strict checks, the in-notebook guard, and the runner."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from gsworkbench import notebooks as nbs

SOURCE = 'num = 4\nrate = 0.5\nname = "torus"\nflag = False\nresults_dir = ""\n# comment\nx: int = 3\n'


def test_parse_parameters_source():
    assert nbs.parse_parameters_source(SOURCE) == {
        "num": 4,
        "rate": 0.5,
        "name": "torus",
        "flag": False,
        "results_dir": "",
        "x": 3,
    }


def test_validate_parameters():
    d = nbs.parse_parameters_source(SOURCE)
    assert nbs.validate_parameters(d, {"rate": 2})["rate"] == 2.0  # an int is a valid float
    with pytest.raises(nbs.ParameterError, match="unknown notebook parameter.*nmu"):
        nbs.validate_parameters(d, {"nmu": 5})
    with pytest.raises(nbs.ParameterError, match="'num' must be of type int.*got str"):
        nbs.validate_parameters(d, {"num": "many"})
    with pytest.raises(nbs.ParameterError, match="'flag' must be of type bool"):
        nbs.validate_parameters(d, {"flag": 1})
    with pytest.raises(nbs.ParameterError, match="'num' must be of type int.*got bool"):
        nbs.validate_parameters(d, {"num": True})
    assert nbs.parse_cli_value("4096") == 4096 and nbs.parse_cli_value("full") == "full"
    assert nbs.parse_cli_value("0.5") == 0.5


def _notebook_stems():
    return sorted({p.stem for p in nbs.list_notebooks() + nbs.list_scripts()})


@pytest.mark.parametrize("stem", _notebook_stems())
def test_ipynb_is_generated_from_script(stem):
    """Each notebooks/NN_*.py has its NN_*.ipynb, exactly as `gsworkbench sync-notebooks` writes it."""
    script, notebook = nbs.NOTEBOOK_DIR / f"{stem}.py", nbs.NOTEBOOK_DIR / f"{stem}.ipynb"
    assert script.exists(), f"{notebook.name} has no source script {script.name}"
    assert notebook.exists(), f"{notebook.name} is missing: run `gsworkbench sync-notebooks`"
    expected = nbs.files.script_text_as_ipynb(script)
    assert notebook.read_text(encoding="utf-8") == expected, (
        f"{notebook.name} differs from what {script.name} generates: run `gsworkbench sync-notebooks`"
    )


def test_sync_detects_and_repairs_a_stale_notebook(tmp_path):
    src = nbs.list_scripts()[0]
    (tmp_path / src.name).write_text(src.read_text())
    expected = f"{tmp_path / src.stem}.ipynb: missing what {src.name} generates"
    assert nbs.sync_notebooks(tmp_path, check=True) == [expected]
    assert nbs.sync_notebooks(tmp_path) == [str(tmp_path / f"{src.stem}.ipynb")]
    assert nbs.sync_notebooks(tmp_path, check=True) == []
    (tmp_path / src.name).write_text(src.read_text().replace("results_dir = \"\"", "results_dir = \"x\""))
    assert "differs from" in nbs.sync_notebooks(tmp_path, check=True)[0]
    (tmp_path / src.name).unlink()
    assert "no source script" in nbs.sync_notebooks(tmp_path, check=True)[0]


def test_smoke_parameters_round_trip_through_the_script_header():
    for script in nbs.list_scripts():
        assert nbs.smoke_parameters(script) == nbs.smoke_parameters(script.with_suffix(".ipynb"))


@pytest.mark.parametrize("path", nbs.list_notebooks(), ids=lambda p: p.name)
def test_every_notebook_follows_the_conventions(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.kernelspec.name == nbs.KERNEL_NAME
    defaults = nbs.notebook_defaults(path)
    assert "results_dir" in defaults and defaults["results_dir"] == ""
    smoke = nbs.smoke_parameters(path)
    assert smoke, "notebook needs metadata.gsworkbench.smoke_parameters"
    rules = nbs.notebook_rules(path)
    nbs.validate_parameters(defaults, smoke, rules)
    nbs.validate_parameters(defaults, {}, rules)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert "guard = ParameterGuard(" in code[0]
    assert "parameters" in nb.cells[[c.cell_type for c in nb.cells].index("code") + 1].metadata.get("tags", [])
    assert "guard.check(globals())" in code[2]
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"


@pytest.fixture
def tiny_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    guard = nbformat.v4.new_code_cell("from gsworkbench.notebooks import ParameterGuard\nguard = ParameterGuard()")
    params = nbformat.v4.new_code_cell('n = 3\nresults_dir = ""')
    params.metadata["tags"] = ["parameters"]
    check = nbformat.v4.new_code_cell("params = guard.check(globals())\nprint('n is', params['n'])")
    nb.cells = [guard, params, check]
    path = tmp_path / "99_tiny.ipynb"
    nbformat.write(nb, path)
    return path


def test_guard_inside_a_kernel(tiny_notebook, tmp_path):
    """Run through papermill directly: papermill only warns on unknown names; the guard fails."""
    import papermill as pm

    out = pm.execute_notebook(
        str(tiny_notebook), str(tmp_path / "ok.ipynb"), parameters={"n": 5}, kernel_name="python3"
    )
    assert "n is 5" in "".join(o.get("text", "") for c in out.cells for o in c.get("outputs", []))
    with pytest.raises(pm.PapermillExecutionError, match="unknown notebook parameter"):
        pm.execute_notebook(str(tiny_notebook), str(tmp_path / "bad.ipynb"), parameters={"m": 5}, kernel_name="python3")
    with pytest.raises(pm.PapermillExecutionError, match="must be of type int"):
        pm.execute_notebook(
            str(tiny_notebook), str(tmp_path / "bad2.ipynb"), parameters={"n": "x"}, kernel_name="python3"
        )


def test_cli_rejects_bad_parameters_before_running(tmp_path):
    nb = nbs.list_notebooks()[0]
    cmd = [sys.executable, "-m", "gsworkbench.cli", "run", str(nb), "-p", "no_such_param", "1", "--out", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "unknown notebook parameter(s): no_such_param" in out.stderr


def test_run_notebook_writes_results(tiny_notebook, tmp_path):
    out = nbs.run_notebook(tiny_notebook, {"n": 2}, tmp_path / "run")
    assert out.exists() and out.parent == tmp_path / "run"
    executed = nbformat.read(out, as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)
