"""Sweeps on Dask distributed: a tiny notebook over a 2x2 grid, one failing run, resume."""

from __future__ import annotations

import nbformat
import pandas as pd
import pytest

from gsworkbench.cli.bench_commands import parse_sweep_values
from gsworkbench.jupyter.sweep import parameter_grid, run_key, run_sweep

TINY_NOTEBOOK_CELLS = [
    ("code", 'a = 1\nb = "x"\nresults_dir = ""', ["parameters"]),
    ("code", "import os\nfrom pathlib import Path\n\nimport pandas as pd", []),
    ("code", 'if (a, b) == (2, "y") and not os.environ.get("TINY_OK"):\n    raise RuntimeError("made to fail")', []),
    ("code", 'pd.DataFrame({"value": [a * 10], "threads": [os.environ["OMP_NUM_THREADS"]]})'
             '.to_csv(Path(results_dir) / "tiny.csv", index=False)', []),  # fmt: skip
]


@pytest.fixture
def tiny_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for _kind, source, tags in TINY_NOTEBOOK_CELLS:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    return path


def test_notebook_sweep_gathers_rows_records_errors_and_resumes(tiny_notebook, tmp_path, monkeypatch):
    from distributed import LocalCluster

    from gsworkbench.jupyter.sweep import notebook_task

    axes = {"a": [1, 2], "b": ["x", "y"]}
    out = tmp_path / "sweep"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        first = run_sweep(notebook_task(tiny_notebook), axes, out, scheduler=cluster.scheduler_address,
                          workers=2, run_threads=1, progress=False)  # fmt: skip
        assert len(first.ran) == 4 and len(first.table) == 3 and len(first.errors) == 1
        assert first.errors.iloc[0][["a", "b"]].tolist() == [2, "y"]
        assert "made to fail" in first.errors.iloc[0].error
        assert sorted(first.table.value) == [10, 10, 20] and set(first.table.threads) == {1}
        assert set(first.table.columns) >= {"a", "b", "run", "table", "value", "status"}
        written = pd.read_csv(out / "sweep.csv")
        assert len(written) == 4 and sorted(written.status) == ["error", "ok", "ok", "ok"]

        monkeypatch.setenv("TINY_OK", "1")  # a worker started now would see it; these ones do not
        again = run_sweep(notebook_task(tiny_notebook), axes, out, scheduler=cluster.scheduler_address,
                          progress=False)  # fmt: skip
        assert again.ran == [run_key({"a": 2, "b": "y"})]  # only the failed run is run again
        assert len(again.table) == 3 and len(again.errors) == 1


def test_callable_sweep_on_a_local_cluster(tmp_path):
    def task(params, run_dir):
        if params["n"] == 3:
            raise ValueError("n = 3 is not allowed")
        return pd.DataFrame({"square": [params["n"] ** 2]})

    result = run_sweep(task, {"n": [1, 2, 3]}, tmp_path / "s", workers=2, run_threads=1, progress=False)
    assert sorted(result.table.square) == [1, 4] and result.errors.error.str.contains("n = 3").all()
    assert run_sweep(task, {"n": [1, 2]}, tmp_path / "s", progress=False).ran == []  # all complete


def test_grid_and_values():
    assert parameter_grid({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    with pytest.raises(ValueError, match="non-empty list"):
        parameter_grid({"a": []})
    assert parse_sweep_values("1,2") == [1, 2] and parse_sweep_values("torch,ext") == ["torch", "ext"]
    assert parse_sweep_values("[64, 128],[256]") == [[64, 128], [256]]
    assert run_key({"a": 1}) != run_key({"a": "1"})


def test_suite_task_times_the_matching_cases(tmp_path):
    from gsworkbench.jupyter.sweep import suite_task

    task = suite_task("field", quick=True, min_run_time=0.01, mode="forward", covariance="diag")
    df = task({"backend": "torch", "N": 100}, tmp_path)
    assert len(df) == 1 and df.pairs_per_s.iloc[0] > 0 and df.samples_s.iloc[0]
    with pytest.raises(ValueError, match="no case of suite 'field'"):
        task({"backend": "torch", "N": 7}, tmp_path)
