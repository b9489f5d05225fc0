"""Notebook parameters: parsing, strict checks, the in-notebook guard, and the runner."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from gsworkbench import jupyter as nbs

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
    generated = nbs.notebook_dir().glob("[0-9][0-9]_*.ipynb")
    return sorted({p.stem for p in nbs.list_scripts()} | {p.stem for p in generated})


@pytest.mark.parametrize("stem", _notebook_stems())
def test_ipynb_is_generated_from_script(stem):
    """Each notebooks/NN_*.py has its generated NN_*.ipynb (`make setup`), with the script's inputs."""
    script, notebook = nbs.notebook_dir() / f"{stem}.py", nbs.notebook_dir() / f"{stem}.ipynb"
    assert script.exists(), f"{notebook.name} has no source script {script.name}"
    assert notebook.exists(), f"{notebook.name} is missing: run `make setup` or `gsworkbench sync-notebooks`"
    assert nbs.files.inputs_match(notebook, script), (
        f"{notebook.name} differs from what {script.name} generates: run `gsworkbench sync-notebooks`"
    )


def test_sync_detects_and_repairs_a_stale_notebook(tmp_path):
    src = nbs.list_scripts()[0]
    (tmp_path / src.name).write_text(src.read_text())
    target = tmp_path / f"{src.stem}.ipynb"
    expected = f"{target}: missing what {src.name} generates"
    assert nbs.sync_notebooks(tmp_path, check=True) == [expected]
    with pytest.raises(nbs.NotebookNotGenerated, match="not generated from their .py sources.*sync-notebooks"):
        nbs.list_notebooks(tmp_path)
    with pytest.raises(nbs.NotebookNotGenerated, match="not generated from .* yet"):
        nbs.load_notebook(target)
    assert nbs.sync_notebooks(tmp_path) == [str(target)]
    assert target.read_text() == nbs.files.script_text_as_ipynb(src)
    assert nbs.sync_notebooks(tmp_path, check=True) == [] and nbs.list_notebooks(tmp_path) == [target]
    (tmp_path / src.name).write_text(src.read_text().replace("results_dir = \"\"", "results_dir = \"x\""))
    assert "differs from" in nbs.sync_notebooks(tmp_path, check=True)[0]
    with pytest.raises(nbs.NotebookNotGenerated, match="is stale"):
        nbs.load_notebook(target)
    (tmp_path / src.name).unlink()
    assert "no source script" in nbs.sync_notebooks(tmp_path, check=True)[0]


def test_sync_keeps_outputs(tmp_path):
    """A notebook in step is left alone, outputs and all; a stale one gets the new inputs and keeps the
    outputs of the cells jupytext matches with the old ones."""
    src = nbs.list_scripts()[0]
    script = tmp_path / src.name
    script.write_text(src.read_text())
    nbs.sync_notebooks(tmp_path)
    target = script.with_suffix(".ipynb")
    nb = nbformat.read(target, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for cell in code:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="kept\n")]
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, target)
    text = target.read_text()
    assert nbs.sync_notebooks(tmp_path) == [] and target.read_text() == text
    script.write_text(src.read_text().replace("results_dir = \"\"", "results_dir = \"x\""))
    assert nbs.sync_notebooks(tmp_path) == [str(target)]
    assert nbs.files.inputs_match(target, script)
    updated = [c for c in nbformat.read(target, as_version=4).cells if c.cell_type == "code"]
    assert updated[0].outputs and updated[0].outputs[0]["text"] == "kept\n"  # the guard cell did not change
    assert 'results_dir = "x"' in updated[1].source


def test_smoke_parameters_round_trip_through_the_script_header():
    for script in nbs.list_scripts():
        assert nbs.smoke_parameters(script) == nbs.smoke_parameters(script.with_suffix(".ipynb"))


@pytest.mark.parametrize("script", nbs.list_scripts(), ids=lambda p: p.name)
def test_every_notebook_follows_the_conventions(script):
    nb = nbs.load_notebook(script)
    assert nb.metadata.kernelspec.name == nbs.KERNEL_NAME
    defaults = nbs.notebook_defaults(nb)
    assert "results_dir" in defaults and defaults["results_dir"] == ""
    smoke = nbs.smoke_parameters(nb)
    assert smoke, "notebook needs metadata.gsworkbench.smoke_parameters"
    rules = nbs.notebook_rules(nb)
    nbs.validate_parameters(defaults, smoke, rules)
    nbs.validate_parameters(defaults, {}, rules)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert "guard = ParameterGuard(" in code[0]
    assert "parameters" in nb.cells[[c.cell_type for c in nb.cells].index("code") + 1].metadata.get("tags", [])
    assert "guard.check(globals())" in code[2]


@pytest.fixture
def tiny_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    guard = nbformat.v4.new_code_cell("from gsworkbench.jupyter import ParameterGuard\nguard = ParameterGuard()")
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


def test_a_bad_parameter_in_a_kernel_shows_one_internal_frame(tiny_notebook, tmp_path):
    """A bad parameter set inside the notebook showed three internal traceback frames before the line."""
    import papermill as pm
    from papermill.exceptions import strip_color

    nb = nbformat.read(tiny_notebook, as_version=4)
    nb.cells[0].source = 'from gsworkbench.jupyter import ParameterGuard\nguard = ParameterGuard(n={"ge": 1})'
    nbformat.write(nb, tiny_notebook)
    with pytest.raises(pm.PapermillExecutionError) as info:
        pm.execute_notebook(str(tiny_notebook), str(tmp_path / "bad.ipynb"), parameters={"n": 0}, kernel_name="python3")
    text = strip_color("\n".join(info.value.traceback))
    frames = [ln for ln in text.splitlines() if ln.startswith("File ")]
    assert len(frames) == 1 and "in ParameterGuard.check" in frames[0], text
    assert text.rstrip().endswith("ParameterError: parameter 'n' must be >= 1, got 0")


def test_cli_rejects_bad_parameters_before_running(tmp_path):
    nb = nbs.list_notebooks()[0]
    cmd = [sys.executable, "-m", "gsworkbench.cli.main", "run", str(nb), "-p", "no_such_param", "1",
           "--out", str(tmp_path)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "unknown notebook parameter(s): no_such_param" in out.stderr


def test_run_notebook_writes_results(tiny_notebook, tmp_path):
    out = nbs.run_notebook(tiny_notebook, {"n": 2}, tmp_path / "run")
    assert out.exists() and out.parent == tmp_path / "run"
    executed = nbformat.read(out, as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)


# ---- rules, CLI values, the failure report ------------------------------------------------------

RULES = {"num": {"ge": 1}, "rate": {"gt": 0.0, "le": 1.0}, "name": {"choices": ["torus", "shell"]}}


def test_rules_are_checked():
    d = nbs.parse_parameters_source(SOURCE)
    assert nbs.validate_parameters(d, {"num": 1, "rate": 1.0}, RULES)["num"] == 1
    with pytest.raises(nbs.ParameterError, match="'num' must be >= 1, got -5"):
        nbs.validate_parameters(d, {"num": -5}, RULES)
    with pytest.raises(nbs.ParameterError, match="'num' must be >= 1, got 0"):
        nbs.validate_parameters(d, {"num": 0}, RULES)
    with pytest.raises(nbs.ParameterError, match="'rate' must be > 0.0"):
        nbs.validate_parameters(d, {"rate": 0}, RULES)
    with pytest.raises(nbs.ParameterError, match="'name' must be one of 'torus', 'shell'; got 'cube'"):
        nbs.validate_parameters(d, {"name": "cube"}, RULES)
    with pytest.raises(nbs.ParameterError, match="does not have: nope"):
        nbs.validate_parameters(d, {}, {"nope": {"ge": 1}})
    with pytest.raises(nbs.ParameterError, match="unknown key"):
        nbs.parse_rules_source('g = ParameterGuard(num={"min": 1})')


def test_path_rule(tmp_path):
    d = {"ply_path": "", "results_dir": ""}
    rules = {"ply_path": {"path": "file"}}
    assert nbs.validate_parameters(d, {}, rules)["ply_path"] == ""  # "" = not given
    (tmp_path / "a.ply").write_bytes(b"x")
    nbs.validate_parameters(d, {"ply_path": str(tmp_path / "a.ply")}, rules)
    with pytest.raises(nbs.ParameterError, match="'ply_path': file not found: .*missing.ply"):
        nbs.validate_parameters(d, {"ply_path": str(tmp_path / "missing.ply")}, rules)


def test_numbers_parse_as_numbers_and_lists_take_single_values():
    assert nbs.parse_cli_value("5e-2") == 0.05 and isinstance(nbs.parse_cli_value("5e-2"), float)
    assert nbs.parse_cli_value("5e-2", 0.01) == 0.05
    assert nbs.parse_cli_value("1e4", 512) == 10000.0 and nbs.coerce_parameter("n", 512, 1e4) == 10000
    assert nbs.parse_cli_value("true", False) is True
    assert nbs.parse_cli_value("123", "name") == "123"  # a string parameter keeps the text
    assert nbs.parse_cli_value("1000:4") == "1000:4"  # not YAML 1.1's base-60 number 60004
    assert nbs.parse_cli_value("1000", [128, 256]) == [1000]
    assert nbs.parse_cli_value("1000,2000", [128]) == [1000, 2000]
    assert nbs.parse_cli_value("[1000, 2000]", [128]) == [1000, 2000]
    assert nbs.parse_cli_value("ext", ["ext", "torch"]) == ["ext"]
    defaults = {"sizes": [128, 256], "results_dir": ""}
    assert nbs.validate_parameters(defaults, {"sizes": 1000})["sizes"] == [1000]
    with pytest.raises(nbs.ParameterError, match="'sizes' must be >= 1, got 0"):
        nbs.validate_parameters(defaults, {"sizes": [64, 0]}, {"sizes": {"ge": 1}})
    with pytest.raises(nbs.ParameterError, match="must be of type int"):
        nbs.validate_parameters(defaults, {"sizes": ["big"]})


@pytest.fixture
def failing_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    guard = nbformat.v4.new_code_cell(
        'from gsworkbench.jupyter import ParameterGuard\nguard = ParameterGuard(n={"ge": 1})'
    )
    params = nbformat.v4.new_code_cell('n = 3\nresults_dir = ""')
    params.metadata["tags"] = ["parameters"]
    check = nbformat.v4.new_code_cell("params = guard.check(globals())")
    boom = nbformat.v4.new_code_cell("# a comment line\nvalue = {'a': 1}['missing']  # fails\nprint(value)")
    nb.cells = [nbformat.v4.new_markdown_cell("# tiny"), guard, params, check, boom]
    path = tmp_path / "98_failing.ipynb"
    nbformat.write(nb, path)
    return path


def _cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "gsworkbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_failing_notebook_gives_one_short_block(failing_notebook, tmp_path):
    out = _cli("run", failing_notebook, "--out", tmp_path / "run")
    assert out.returncode == 1
    report = out.stderr[out.stderr.index("gsworkbench: notebook"):]
    assert "cell 5: value = {'a': 1}['missing']" in report
    assert "KeyError: 'missing'" in report
    assert f"partly executed notebook: {tmp_path / 'run' / failing_notebook.name}" in report
    assert (tmp_path / "run" / failing_notebook.name).exists()
    assert "Traceback" not in out.stderr and len(report.splitlines()) <= 6
    verbose = _cli("run", failing_notebook, "--out", tmp_path / "run2", "--verbose")
    assert verbose.returncode == 1 and "KeyError" in verbose.stderr and "----> 2" in verbose.stderr


def test_bad_values_are_refused_before_a_kernel_starts(failing_notebook, tmp_path):
    out = _cli("run", failing_notebook, "-p", "n", "0", "--out", tmp_path / "run")
    assert out.returncode == 2
    assert out.stderr.strip() == "gsworkbench: error: parameter 'n' must be >= 1, got 0"
    assert not (tmp_path / "run").exists()
    missing = _cli("run", tmp_path / "99_nope.ipynb")
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"gsworkbench: error: notebook not found: {tmp_path / '99_nope.ipynb'}"


def _writing_notebook(path):
    """A notebook whose one cell writes ``made.txt`` into its ``results_dir`` parameter."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('results_dir = ""')
    params.metadata["tags"] = ["parameters"]
    write = nbformat.v4.new_code_cell("from pathlib import Path\n(Path(results_dir) / 'made.txt').write_text('x')")
    nb.cells = [params, write]
    nbformat.write(nb, path)


def test_a_relative_out_is_the_callers_and_the_executed_notebook_is_trusted(tmp_path, monkeypatch):
    """--out build/x from the caller's folder: the kernel (which runs in the notebook's folder) writes
    there, not into <notebook folder>/build/x. The executed notebook is signed as trusted, so JupyterLab
    renders its HTML outputs (inline SVG flamegraphs) rather than sanitising them to text."""
    from nbformat.sign import NotebookNotary

    nb_dir, caller = tmp_path / "nbs", tmp_path / "caller"
    nb_dir.mkdir()
    caller.mkdir()
    _writing_notebook(nb_dir / "97_writes.ipynb")
    monkeypatch.chdir(caller)
    executed = nbs.run_notebook(nb_dir / "97_writes.ipynb", {}, "build/x")
    assert (caller / "build" / "x" / "made.txt").is_file() and not (nb_dir / "build").exists()
    assert executed == caller / "build" / "x" / "97_writes.ipynb"
    assert NotebookNotary().check_signature(nbformat.read(executed, as_version=4))


def test_results_dir_as_a_parameter_is_the_run_folder(tmp_path, monkeypatch):
    """-p results_dir DIR was accepted and silently replaced by a new results/<run-id>/ folder."""
    _writing_notebook(tmp_path / "96_dir.ipynb")
    monkeypatch.chdir(tmp_path)
    executed = nbs.run_notebook(tmp_path / "96_dir.ipynb", {"results_dir": "mine"})
    assert executed == tmp_path / "mine" / "96_dir.ipynb" and (tmp_path / "mine" / "made.txt").is_file()
    with pytest.raises(ValueError, match="results_dir mine2 and the run folder .* differ"):
        nbs.run_notebook(tmp_path / "96_dir.ipynb", {"results_dir": "mine2"}, tmp_path / "other")


# ---- the run folder: one run at a time, usable, and what a dying kernel leaves -----------------------


def test_a_second_run_into_a_held_folder_is_refused_naming_the_holder(tmp_path):
    """Two runs into the same --out both succeeded, and the folder ended with the second run's files."""
    _writing_notebook(tmp_path / "92_writes.ipynb")
    out = tmp_path / "out"
    hold = ("import sys\nfrom gsworkbench.core.runs import run_lock\nwith run_lock(sys.argv[1], 'the first run'):\n"
            "    print('held', flush=True)\n    sys.stdin.readline()\n")  # fmt: skip
    holder = subprocess.Popen([sys.executable, "-c", hold, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        second = _cli("run", tmp_path / "92_writes.ipynb", "--out", out)
        assert second.returncode == 2 and not (out / "made.txt").exists()
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, second.stderr
        assert lines[0].startswith(f"gsworkbench: error: the run folder {out} is in use by process {holder.pid} "
                                   f"(the first run), started ")  # fmt: skip
        assert lines[0].endswith(": wait for that run to end, or give another folder")
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    assert not (out / ".gsworkbench-run.lock").exists()  # the lock goes with its run
    again = _cli("run", tmp_path / "92_writes.ipynb", "--out", out)
    assert again.returncode == 0, again.stderr
    assert (out / "made.txt").is_file() and not (out / ".gsworkbench-run.lock").exists()


def test_an_unusable_out_is_one_line(tmp_path, monkeypatch, capsys):
    """--out on an existing file (a 15-line FileExistsError) or a read-only mount (15-39 lines)."""
    import errno
    import os

    from gsworkbench.cli import main as cli

    _writing_notebook(tmp_path / "91_writes.ipynb")
    (tmp_path / "a_file").write_text("x")
    assert cli.main(["run", str(tmp_path / "91_writes.ipynb"), "--out", str(tmp_path / "a_file")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"gsworkbench: error: the run folder {tmp_path / 'a_file'} is an existing file, not a folder"
    assert cli.main(["run", str(tmp_path / "91_writes.ipynb"), "--out", str(tmp_path / "a_file" / "sub")]) == 2
    assert capsys.readouterr().err.strip() == f"gsworkbench: error: cannot write the run folder " \
        f"{tmp_path / 'a_file' / 'sub'}: Not a directory"
    readonly = tmp_path / "ro"
    readonly.mkdir()
    real_open = os.open

    def open_on_a_read_only_mount(path, *args, **kwargs):  # as os.open fails on a read-only mount
        if str(path).startswith(str(readonly)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_on_a_read_only_mount)
    assert cli.main(["run", str(tmp_path / "91_writes.ipynb"), "--out", str(readonly)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gsworkbench: error: cannot write the run folder {readonly}: Read-only file system"
    )


def test_a_killed_kernel_is_one_line_with_the_cell_signal_what_was_kept_and_how_to_go_on(tmp_path):
    """A kernel killed by the OOM killer or kill -9 gave "cell 8/15 done" and a 49-line DeadKernelError
    traceback."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('resume = ""\nresults_dir = ""')
    params.metadata["tags"] = ["parameters"]
    keep = nbformat.v4.new_code_cell("from pathlib import Path\n(Path(results_dir) / 'checkpoint.pt').write_text('x')")
    die = nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    after = nbformat.v4.new_code_cell("print('not reached')")
    guard = nbformat.v4.new_code_cell('from gsworkbench.jupyter import ParameterGuard\nguard = ParameterGuard('
                                      'resume={"path": "dir"})')  # fmt: skip
    nb.cells = [guard, params, keep, die, after]
    path = tmp_path / "90_dies.ipynb"
    nbformat.write(nb, path)
    out = _cli("run", path, "--out", tmp_path / "run")
    assert out.returncode == 1, out.stderr
    said = [ln for ln in out.stderr.splitlines() if ln.startswith("gsworkbench:")]
    run = tmp_path / "run"
    assert said == [
        f"gsworkbench: notebook {path}: the kernel died in cell 4/5 (killed by SIGKILL: out of memory, or kill -9);"
        f" kept checkpoint.pt in {run}; to go on: gsworkbench run {path} -p resume {run} (and the same -p as before);"
        f" partly executed notebook: {run / path.name}"
    ], out.stderr
    assert "Traceback" not in out.stderr and "DeadKernelError" not in out.stderr and "Kernel died" not in out.stderr
    assert "cell 4/5 done" not in out.stderr
    assert (run / path.name).is_file()
