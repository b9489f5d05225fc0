"""Results others can read: file modes follow the umask, counts are integers, float64 PLY is not lost
silently, metadata names the compiler and CPU."""

from __future__ import annotations

import math
import os
import stat
import warnings

import pytest
import torch

from gsworkbench.core.atomic import atomic_path, atomic_write_text
from gsworkbench.core.provenance import environment, short_commit
from gsworkbench.core.splats import synthetic_splats
from gsworkbench.io import read_ply, write_ply


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        path = atomic_write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_files_written_by_name_follow_the_umask_and_appear_only_when_complete(tmp_path, umask):
    """atomic_path: for writers that take a file name (torch.profiler's chrome trace, ...)."""
    old = os.umask(umask)
    try:
        with atomic_path(tmp_path / "trace.json.gz") as tmp:
            assert tmp.name.endswith(".tmp.gz") and tmp.parent == tmp_path  # the format is picked by name
            tmp.write_text("x")
            assert not (tmp_path / "trace.json.gz").exists()
        with pytest.raises(RuntimeError), atomic_path(tmp_path / "b.txt") as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "trace.json.gz").stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json.gz"]  # nothing half-written left


def test_float64_ply_warns_or_keeps_double(tmp_path):
    s64 = synthetic_splats(50, 3, seed=0).to(torch.float64)
    with pytest.warns(UserWarning, match="float64 splats are stored as float32"):
        write_ply(tmp_path / "a.ply", s64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_ply(tmp_path / "b.ply", s64, dtype=torch.float64)
        write_ply(tmp_path / "c.ply", s64.to(torch.float32))
    back = read_ply(tmp_path / "b.ply", dtype=torch.float64)
    for name in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        assert torch.equal(getattr(back, name), getattr(s64, name)), name
    assert read_ply(tmp_path / "b.ply").means.dtype == torch.float32  # default stays float32
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        write_ply(tmp_path / "d.ply", s64, dtype=torch.float16)


def test_short_commit_names_the_commit_and_dirty_flag_of_the_environment():
    env = environment()
    short = short_commit()
    if env["git_commit"] is None:
        assert short == "unknown"
    else:
        assert env["git_commit"].startswith(short.removesuffix("-dirty")) and len(short.removesuffix("-dirty")) >= 7
        assert short.endswith("-dirty") == env["git_dirty"]


def test_metadata_names_cpu_and_compiler():
    env = environment()
    assert env["cpu_model"]
    if env["extension"]["built"]:
        build = env["extension"]["build"]
        assert build is not None, "setup.py records gsworkbench/_build_info.json"
        assert any(f.startswith("-march=") for f in build["cxx_flags"]) and build["cxx_version"]


def test_count_columns_are_integers_and_one_round_has_no_spread():
    from gsworkbench.bench.registry import Case
    from gsworkbench.bench.runner import run_cases

    slow = Case("slow", {"backend": "a"}, lambda: (lambda: sum(range(200_000))))
    skipped = Case("skipped", {"backend": "b"}, lambda: (lambda: None), skip="not here")
    df = run_cases([slow, skipped], threads=1, min_run_time=1e-4, progress=False)
    for col in ("threads", "runs", "calls_per_run"):
        assert str(df[col].dtype) == "Int64", col
    assert df.runs[0] == 1 and math.isnan(df.iqr_s[0])  # one round: no spread, not an IQR of 0
    assert df.threads[1] == 1 and df.runs.isna()[1]
