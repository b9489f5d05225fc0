"""The project folder comes from the working folder (or a given path), not from where the package is
installed: two clones sharing one environment each use their own notebooks/ and results/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gsworkbench.cli.main import main
from gsworkbench.core import project, runs
from gsworkbench.jupyter import list_scripts

PYPROJECT = '[project]\nname = "gsworkbench"\nversion = "0.1.0"\n'


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch):
    """Neither override set, and whatever a test (or ``--project``) sets is undone after it."""
    for name in (project.PROJECT_ENV, project.RESULTS_ENV):
        monkeypatch.setenv(name, "")  # recorded first, so that the end of the test restores the original
        monkeypatch.delenv(name)


def _make_project(root: Path, script: Path) -> Path:
    """A project folder: the pyproject.toml naming gsworkbench and notebooks/ with one script."""
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    shutil.copy(script, root / "notebooks" / script.name)
    return root


@pytest.fixture
def two_projects(tmp_path):
    script = list_scripts(project.PACKAGE_CHECKOUT / "notebooks")[0]
    return _make_project(tmp_path / "first", script), _make_project(tmp_path / "second", script)


def test_the_project_is_the_nearest_one_above_the_working_folder(two_projects, monkeypatch):
    first, second = two_projects
    monkeypatch.chdir(second / "notebooks")
    assert project.find_project().path == second.resolve()
    assert project.notebook_dir() == second.resolve() / "notebooks"
    assert project.results_root() == second.resolve() / "results"
    run = runs.new_run_dir("unit")
    assert run.parent == second.resolve() / "results"
    monkeypatch.chdir(first)
    assert project.find_project().path == first.resolve()
    assert project.results_root() == first.resolve() / "results"


def test_markers_must_both_be_there_and_name_this_project(tmp_path, monkeypatch):
    other = tmp_path / "other"
    (other / "notebooks").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    half = tmp_path / "half"
    half.mkdir()
    (half / "pyproject.toml").write_text(PYPROJECT)  # no notebooks/
    assert not project.is_project_dir(other) and not project.is_project_dir(half)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "notebooks").mkdir()
    (tmp_path / "broken" / "pyproject.toml").write_text("[project\n")
    assert not project.is_project_dir(tmp_path / "broken")
    monkeypatch.chdir(other / "notebooks")
    found = project.find_project()
    assert found.path == project.PACKAGE_CHECKOUT and found.source.startswith("no project folder above")


def test_overrides_by_environment(two_projects, monkeypatch, tmp_path):
    first, second = two_projects
    monkeypatch.chdir(second)
    monkeypatch.setenv(project.PROJECT_ENV, str(first))
    assert project.find_project().path == first.resolve()
    monkeypatch.setenv(project.RESULTS_ENV, str(tmp_path / "elsewhere"))
    assert project.results_root() == tmp_path / "elsewhere"
    assert "GSW_RESULTS_DIR" in project.results_source()
    monkeypatch.setenv(project.PROJECT_ENV, str(tmp_path))
    with pytest.raises(ValueError, match="GSW_PROJECT_DIR=.*not a gsworkbench project folder"):
        project.find_project()


def test_sync_notebooks_writes_into_the_working_project_and_says_which(two_projects, monkeypatch, capsys):
    first, second = two_projects
    monkeypatch.chdir(second)
    assert main(["sync-notebooks"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"notebooks: {second.resolve() / 'notebooks'} (")
    assert list((second / "notebooks").glob("*.ipynb")) and not list((first / "notebooks").glob("*.ipynb"))
    assert main(["sync-notebooks", "--project", str(first)]) == 0  # a path, from anywhere
    assert f"notebooks: {first.resolve() / 'notebooks'}" in capsys.readouterr().out
    assert list((first / "notebooks").glob("*.ipynb"))


def test_a_project_path_that_is_not_one_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["sync-notebooks", "--check", "--project", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--project {tmp_path}: not a gsworkbench project folder" in err


def test_falling_back_to_the_package_checkout_is_noted_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(project, "_noted_fallback", False)
    assert project.project_dir() == project.PACKAGE_CHECKOUT
    assert project.results_root() == project.PACKAGE_CHECKOUT / "results"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("gsworkbench: note: project folder") and str(tmp_path) in err[0]
