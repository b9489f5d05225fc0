"""start_run: the run folder, metadata, seed and link that every notebook starts with."""

from __future__ import annotations

import json

import pytest
import torch

from gsworkbench.jupyter.start import start_run


def test_start_run_into_a_given_folder_records_params_and_seeds(tmp_path):
    params = {"results_dir": str(tmp_path / "run"), "seed": 7, "n": 3}
    run_dir = start_run("01_x", params, seed=7, show=False)
    assert run_dir == tmp_path / "run"
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["parameters"] == params and "git_commit" in meta
    first = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(first, torch.rand(3))  # the global generator was seeded with 7


def test_start_run_without_a_folder_makes_a_new_one(tmp_path, monkeypatch):
    monkeypatch.setenv("GSW_RESULTS_DIR", str(tmp_path))
    run_dir = start_run("05_y", {"results_dir": ""}, show=False)
    assert run_dir.parent == tmp_path and "-05_y-" in run_dir.name and (run_dir / "metadata.json").is_file()


def test_start_run_shows_a_link_to_the_folder(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    run_dir = start_run("02_z", {"results_dir": str(tmp_path)})
    assert len(shown) == 1 and shown[0].path == run_dir.resolve() and shown[0].label == "results"


def test_start_run_needs_results_dir():
    with pytest.raises(ValueError, match="02_z: the notebook's parameters lack results_dir"):
        start_run("02_z", {"seed": 1}, show=False)
