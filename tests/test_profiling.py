"""gsworkbench.profiling: stage breakdowns, op tables, py-spy flamegraphs, diffs, and their errors."""

from __future__ import annotations

import gzip
import json
import shutil
import stat
import time
from collections import Counter
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import ext_built, requires_ext
from fake_clock import OpClock

from gsworkbench import profiling
from gsworkbench.cli.main import main
from gsworkbench.profiling import compare, flamegraph, pyspy, stages
from gsworkbench.profiling.run import load_profile, profile
from gsworkbench.profiling.workloads import make_workload

SMALL_RENDER = dict(num=1500, width=96, height=96, sh_degree=2, calls=2)
FAST = dict(repeats=3, warmup=1, log=None)


def _backend() -> str:
    return "ext" if ext_built() else "torch"


@pytest.fixture(scope="module")
def render_run(tmp_path_factory: pytest.TempPathFactory) -> profiling.ProfileRun:
    """One profile of a small render, with py-spy (--native) where it can attach."""
    out = tmp_path_factory.mktemp("render") / "run"
    return profile("render", {**SMALL_RENDER, "backend": _backend()}, rate=250, sample_s=1.0, out=out, **FAST)


def _sleepy(slow_stage: str | None, seconds: float = 0.01):  # noqa: ANN202
    def fn(stage) -> None:  # noqa: ANN001
        for name in ("a", "b", "c"):
            with stage(name):
                time.sleep(3 * seconds if name == slow_stage else seconds)

    return profiling.callable_workload(fn, name="test:sleepy", params={"n": 3})


# ---- stage breakdown ----------------------------------------------------------------------------


def _op_repeats(spec: str | Callable[..., None], params: dict, repeats: int = 2) -> pd.DataFrame:
    """``repeats`` runs of a workload timed on an :class:`OpClock`: its "seconds" count the torch ops
    dispatched, so each stage's share is the share of the work it holds, the same on a loaded machine
    as on a quiet one."""
    run = make_workload(spec, params).setup()
    clock = OpClock()
    with clock:
        return stages.time_repeats(run, repeats, clock=clock)


def test_op_clock_coverage_counts_the_ops_outside_the_stages() -> None:
    x = torch.ones(4)

    def fn(stage) -> None:  # noqa: ANN001
        with stage("inside"):
            for _ in range(3):
                x.add(1)
        x.mul(2)  # one op outside every stage

    wide = _op_repeats(fn, {}).pivot_table(index="repeat", columns="stage", values="seconds")
    assert (wide["other"] == 1).all() and (wide["inside"] >= 3).all(), wide.to_string()
    assert (stages.coverage(_op_repeats(fn, {})) < 1).all()


def test_render_stages_hold_the_work(render_run: profiling.ProfileRun) -> None:
    cov = stages.coverage(render_run.repeats)
    # on the wall clock only what holds however busy the machine is: the stages are disjoint parts of a run
    assert len(cov) == 3 and (cov > 0).all() and (cov <= 1.0 + 1e-9).all(), cov.tolist()
    # every op of a render runs inside a named stage (glue: the rasterize call between its stages)
    work = _op_repeats("render", {**SMALL_RENDER, "backend": _backend()})
    assert (stages.coverage(work) == 1.0).all(), work.to_string()
    ops = work.groupby("stage").seconds.min()
    assert ops[["project", "sh", "isect", "rasterize", "backward"]].gt(0).all(), work.to_string()
    t = render_run.stages.set_index("stage")
    assert {"project", "sh", "isect", "rasterize", "backward", "other", "total (wall)"} <= set(t.index)
    # per run, the named stages plus 'other' are the wall time
    wide = render_run.repeats.pivot_table(index="repeat", columns="stage", values="seconds")
    parts = wide.drop(columns="total (wall)").sum(axis=1)
    assert ((parts - wide["total (wall)"]).abs() < 1e-9).all()
    # the profiler ranges were recorded for every named stage
    assert t.loc[["project", "rasterize", "backward"], "profiler_s"].gt(0).all()


def test_field_stages_hold_the_work(tmp_path) -> None:
    params = {"N": 200, "B": 4000, "backend": _backend(), "calls": 3}
    run = profile("field", params, pyspy_enabled=False, out=tmp_path, **FAST)
    assert (stages.coverage(run.repeats) <= 1.0 + 1e-9).all()
    assert (stages.coverage(_op_repeats("field", params)) == 1.0).all()  # every op in forward or backward
    assert {"forward", "backward"} <= set(run.stages.stage)
    assert run.metadata["pyspy"] == "not asked for"


def test_train_stages_hold_the_work(tmp_path) -> None:
    params = {"iterations": 8, "backend": _backend()}
    run = profile("train:smoke", params, pyspy_enabled=False, out=tmp_path, **FAST)
    assert (stages.coverage(run.repeats) <= 1.0 + 1e-9).all()
    # the stages hold the work: outside them only each step's read-back of its loss terms for the history
    work = stages.coverage(_op_repeats("train:smoke", params, repeats=1))
    assert (work >= 0.9).all(), work.tolist()
    assert {"init", "project", "rasterize", "loss", "backward", "optimizer", "densify"} <= set(run.stages.stage)
    assert (run.ops["name"] == "stage:backward").any()


def test_files_and_metadata(render_run: profiling.ProfileRun) -> None:
    names = {p.name for p in render_run.run_dir.iterdir()}
    assert {
        "metadata.json",
        "repeats.csv",
        "stages.csv",
        "stages.png",
        "ops.csv",
        "trace.json.gz",
        "overhead.csv",
    } <= names
    meta = render_run.metadata
    assert meta["status"] == "done" and meta["workload"] == "render" and meta["parameters"]["num"] == 1500
    assert meta["git_commit"] is not None and meta["threads"]["torch_threads"] == torch.get_num_threads()
    modes = {stat.S_IMODE(p.stat().st_mode) for p in render_run.run_dir.iterdir() if p.is_file()}
    assert len(modes) == 1, modes  # every file, the trace included, gets the mode a new file gets
    trace = json.loads(gzip.decompress((render_run.run_dir / "trace.json.gz").read_bytes()))
    assert any(e.get("name", "").startswith("stage:") for e in trace["traceEvents"])
    assert list(render_run.overhead["mode"][:2]) == ["no profiler", "torch.profiler"]
    back = load_profile(render_run.run_dir)
    pd.testing.assert_frame_equal(back.stages, render_run.stages, check_exact=False)


# ---- op table and flamegraph --------------------------------------------------------------------


@requires_ext
def test_op_table_has_the_rasterizer_ops(render_run: profiling.ProfileRun) -> None:
    names = set(render_run.ops["name"])
    for op in (
        "splat_project",
        "splat_sh_to_color",
        "splat_isect_tiles",
        "splat_rasterize",
        "splat_rasterize_backward",
    ):
        assert f"gsworkbench::{op}" in names, op
    row = render_run.ops.set_index("name").loc["gsworkbench::splat_rasterize"]
    assert row["calls"] == SMALL_RENDER["calls"] and row["self_cpu_s"] > 0


@requires_ext
def test_native_flamegraph_has_extension_frames(render_run: profiling.ProfileRun) -> None:
    if not str(render_run.metadata["pyspy"]).startswith("ok"):
        pytest.skip(f"py-spy cannot attach here: {render_run.metadata['pyspy']}")
    frames = {f for stack in render_run.folded for f in stack.split(";")}
    assert any("(csrc/cpu/" in f for f in frames), "no frame from the extension's C++ sources"
    svg = (render_run.run_dir / "flamegraph.svg").read_text()
    assert svg.startswith("<svg") and "csrc/cpu/" in svg
    assert flamegraph.read_folded(render_run.run_dir / "stacks.folded") == render_run.folded
    doc = json.loads((render_run.run_dir / "profile.speedscope.json").read_text())
    assert doc["profiles"] and doc["shared"]["frames"]


def test_missing_pyspy_still_writes_the_torch_outputs(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(pyspy, "find_pyspy", lambda: None)
    run = profile(_sleepy(None, 0.002), out=tmp_path, **FAST)
    assert "not installed" in run.metadata["pyspy"] and run.folded is None
    assert (tmp_path / "ops.csv").is_file() and (tmp_path / "trace.json.gz").is_file()
    assert not (tmp_path / "flamegraph.svg").exists()


# ---- diff ---------------------------------------------------------------------------------------


def test_diff_against_itself_is_quiet(render_run: profiling.ProfileRun, tmp_path) -> None:
    d = profiling.diff(render_run.run_dir, render_run.run_dir, out=tmp_path)
    assert d.significant == [] and not d.stages["significant"].any()
    assert (d.stages["ratio"] == 1).all()
    if d.frames is not None:
        assert d.frames["inclusive_change"].abs().max() == 0
    assert (tmp_path / "stages_diff.csv").is_file()


def _fixed_repeats(run_dir, slow_stage: str | None, seed: int, seconds: float = 0.01, n: int = 8) -> None:
    """Replaces a profile's measured repeats by ``n`` fixed samples (stages a, b, c of ``seconds`` each,
    the slow stage 3x, with a 2% lognormal spread from ``seed``), so the diff's significance test sees
    the same numbers on a loaded machine as on a quiet one."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n):
        times = {s: seconds * (3 if s == slow_stage else 1) * rng.lognormal(0, 0.02) for s in ("a", "b", "c")}
        times["other"] = 1e-4 * rng.lognormal(0, 0.02)
        rows += [{"repeat": r, "stage": s, "seconds": v} for s, v in times.items()]
        rows.append({"repeat": r, "stage": "total (wall)", "seconds": sum(times.values())})
    pd.DataFrame(rows).to_csv(run_dir / "repeats.csv", index=False)


def test_diff_finds_the_slowed_stage_and_only_it(tmp_path) -> None:
    before = profile(_sleepy(None), out=tmp_path / "before", pyspy_enabled=False, repeats=5, warmup=1, log=None)
    after = profile(_sleepy("b"), out=tmp_path / "after", pyspy_enabled=False, repeats=5, warmup=1, log=None)
    assert set(before.repeats.stage) == set(after.repeats.stage) >= {"a", "b", "c", "other", "total (wall)"}
    _fixed_repeats(tmp_path / "before", None, seed=1)  # the measured samples depend on the machine's load
    _fixed_repeats(tmp_path / "after", "b", seed=2)
    d = profiling.diff(tmp_path / "before", tmp_path / "after", out=tmp_path / "diff")
    assert d.significant == ["b"], d.stages.to_string()
    row = d.stages.set_index("stage").loc["b"]
    assert 2.0 < row["ratio"] < 4.0
    assert before.metadata["workload"] == after.metadata["workload"] == "test:sleepy"
    text = compare.diff_summary(d)
    assert "significant changes: b" in text
    assert "significance: Mann-Whitney U (two-sided), p < 0.002, n=8," in text


def test_diff_summary_is_narrow(tmp_path) -> None:
    """Op names of a hundred characters (templated C++ symbols) are cut, so no printed row wraps."""
    before = profile(_sleepy(None), out=tmp_path / "before", pyspy_enabled=False, repeats=2, warmup=0, log=None)
    long = "gsworkbench::" + "splat_rasterize_backward_with_a_very_long_templated_name<float, 16, 3>" * 2
    ops = pd.DataFrame({"name": [long, "aten::mul"], "calls": [3, 5], "self_cpu_s": [0.5, 0.25],
                        "cpu_total_s": [0.5, 0.25]})  # fmt: skip
    ops.to_csv(tmp_path / "before" / "ops.csv", index=False)
    after = tmp_path / "after"
    shutil.copytree(tmp_path / "before", after)
    ops.assign(self_cpu_s=[2.509551e6 / 1e6, 0.1]).to_csv(after / "ops.csv", index=False)
    text = compare.diff_summary(profiling.diff(before, after, save=False))
    widest = max(text.splitlines(), key=len)
    assert len(widest) <= 110, widest
    assert "gsworkbench::splat_rasterize_backward" in text and "aten::mul" in text


def test_diff_warns_on_other_thread_count(render_run: profiling.ProfileRun, tmp_path) -> None:
    other = tmp_path / "copy"
    shutil.copytree(render_run.run_dir, other)
    meta = json.loads((other / "metadata.json").read_text())
    meta["settings"]["threads"] += 1
    (other / "metadata.json").write_text(json.dumps(meta))
    d = profiling.diff(render_run.run_dir, other, save=False)
    assert any("threads" in w for w in d.warnings)


# ---- flamegraphs on known stacks ----------------------------------------------------------------

BEFORE = Counter({"main (a.py:1);f (a.py:5);g (a.py:9)": 60, "main (a.py:1);h (a.py:20)": 40})
AFTER = Counter({"main (a.py:1);f (a.py:6);g (a.py:9)": 20, "main (a.py:1);h (a.py:20)": 80})


def test_frame_changes_on_known_stacks() -> None:
    ch = flamegraph.frame_changes(BEFORE, AFTER).set_index("frame")
    assert ch.loc["f (a.py)", "inclusive_before"] == pytest.approx(0.6)
    assert ch.loc["f (a.py)", "inclusive_after"] == pytest.approx(0.2)  # line 5 -> 6 still matches
    assert ch.loc["h (a.py)", "inclusive_change"] == pytest.approx(0.4)
    assert ch.loc["main (a.py)", "inclusive_change"] == pytest.approx(0.0)
    assert ch.loc["g (a.py)", "self_change"] == pytest.approx(-0.4)
    assert abs(ch["inclusive_change"].iloc[0]) == pytest.approx(0.4)  # largest change first


def test_diff_flamegraph_colours_by_change_of_share() -> None:
    svg = flamegraph.diff_flamegraph_svg(BEFORE, AFTER)
    red, blue = "rgb(255,64,64)", "rgb(64,64,255)"  # saturated: the largest change, +-40 points
    h = svg.index("<title>h (a.py): 40.00% -&gt; 80.00%")
    assert red in svg[h : h + 300]
    f = svg.index("<title>f (a.py): 60.00% -&gt; 20.00%")
    assert blue in svg[f : f + 300]
    m = svg.index("<title>main (a.py): 100.00% -&gt; 100.00%")
    assert "rgb(255,255,255)" in svg[m : m + 300]
    with pytest.raises(ValueError, match="no samples"):
        flamegraph.diff_flamegraph_svg(BEFORE, Counter())


def test_folded_round_trip_and_tree(tmp_path) -> None:
    path = flamegraph.write_folded(tmp_path / "s.folded", BEFORE)
    assert flamegraph.read_folded(path) == BEFORE
    root = flamegraph.build_tree(BEFORE)
    assert root.count == 100 and root.children["main (a.py:1)"].children["f (a.py:5)"].count == 60
    (tmp_path / "bad.folded").write_text("main;f 3\nno count here\n")
    with pytest.raises(ValueError, match="bad.folded:2"):
        flamegraph.read_folded(tmp_path / "bad.folded")


def _two_thread_doc() -> dict:
    """A py-spy speedscope recording of a workload thread and a kernel's idle IOPub thread."""
    frames = [
        {"name": "run", "file": "/x/work.py", "line": 3},
        {"name": "epoll_wait", "file": "/l/libc.so.6", "line": 0},
        {"name": "loop", "file": "/x/iopub.py", "line": 8},
    ]
    return {"shared": {"frames": frames}, "profiles": [
        {"name": 'Thread 501 "MainThread"', "samples": [[0]] * 3, "weights": [0.01] * 3},
        {"name": 'Thread 777 "IOPub"', "samples": [[2, 1]] * 6, "weights": [0.01] * 6},
    ]}  # fmt: skip


def test_one_thread_is_kept_and_the_rest_named() -> None:
    doc = _two_thread_doc()
    assert pyspy.profile_thread('Thread 501 "MainThread"') == (501, "MainThread")
    assert pyspy.profile_thread("something else") == (None, "something else")
    assert sum(pyspy.speedscope_to_folded(doc, rate=100).values()) == 9  # every thread
    folded, left_out = pyspy.one_thread_folded(doc, 501, rate=100)
    assert folded == {"run (work.py:3)": 3} and left_out == {"IOPub (777)": 6}
    note = pyspy.left_out_note(3, left_out)
    assert note == "left out: 6 samples (67%) of 1 other thread(s): IOPub (777)"
    # a thread id no profile has (py-spy naming threads otherwise): every thread, nothing left out
    assert pyspy.one_thread_folded(doc, 999, rate=100) == (pyspy.speedscope_to_folded(doc, rate=100), {})


def test_flamegraph_samples_the_workload_thread_not_the_idle_ones(tmp_path) -> None:
    """As in a Jupyter kernel: the workload runs on one thread while others (IOPub, heartbeat) are
    alive; here they are made busier than idle ones so that, were they kept, they would dominate."""
    import threading

    stop = threading.Event()

    def chatter() -> None:  # a kernel thread's loop: wakes, does a little, waits
        while not stop.is_set():
            sum(range(20000))
            stop.wait(0.001)

    noise = [threading.Thread(target=chatter, name=f"kernel-{k}", daemon=True) for k in range(3)]

    def workload_spin(stage) -> None:  # noqa: ANN001
        with stage("spin"):
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.05:
                sum(range(5000))

    wl = profiling.callable_workload(workload_spin, name="test:spin", params={"n": 1})
    result: dict = {}

    def run_in_thread() -> None:  # not the main thread, as a kernel's executing thread need not be
        try:
            result["run"] = profile(wl, out=tmp_path / "spin", repeats=1, warmup=0, rate=200, sample_s=0.5,
                                    log=None)  # fmt: skip
        except BaseException as err:  # re-raised in the test's thread
            result["error"] = err

    for t in noise:
        t.start()
    try:
        worker = threading.Thread(target=run_in_thread, name="workload")
        worker.start()
        worker.join()
    finally:
        stop.set()
        for t in noise:
            t.join()
    if "error" in result:
        raise result["error"]
    run = result["run"]
    if not str(run.metadata["pyspy"]).startswith("ok"):
        pytest.skip(f"py-spy cannot attach here: {run.metadata['pyspy']}")
    total = sum(run.folded.values())
    mine = sum(n for stack, n in run.folded.items() if "workload_spin" in stack or "run_in_thread" in stack)
    assert total and mine == total, "a sample of another thread is in the flamegraph"
    assert not any("chatter" in stack for stack in run.folded)
    threads = run.metadata["pyspy_threads"]
    assert threads["sampled"].startswith("workload (")
    left = threads["left_out"]
    assert any(name.startswith("kernel-") for name in left) and sum(left.values()) > 0
    svg = (run.run_dir / "flamegraph.svg").read_text()
    assert "of workload (the workload&#x27;s thread)" in svg or "of workload (the workload's thread)" in svg
    assert "left out:" in svg and "kernel-" in svg
    assert "flamegraph: the samples of workload (" in profiling.summary(run)


def test_speedscope_to_folded() -> None:
    frames = [
        {"name": "main", "file": "/x/a.py", "line": 3},
        {"name": "0x7f00aa", "file": "/l/libc.so.6", "line": 0},
        {"name": "k", "file": "/r/csrc/cpu/splat.cpp", "line": 7},
        {"name": "stop", "file": "/w/gsworkbench/profiling/pyspy.py", "line": 9},
    ]
    samples = [[0, 2], [0, 2], [0, 1], [0, 3]]
    doc = {"shared": {"frames": frames}, "profiles": [{"samples": samples, "weights": [0.01, 0.01, 0.02, 0.01]}]}
    folded = pyspy.speedscope_to_folded(doc, rate=100)
    assert folded == {"main (a.py:3);k (csrc/cpu/splat.cpp:7)": 2, "main (a.py:3);[unknown] (libc.so.6)": 2}


# ---- bad input ----------------------------------------------------------------------------------


def test_bad_input_gets_clear_errors(render_run: profiling.ProfileRun, tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        profile("nope", out=tmp_path / "x", log=None)
    with pytest.raises(ValueError, match="unknown preset"):
        profile("train:huge", out=tmp_path / "x", log=None)
    with pytest.raises(ValueError, match="unknown render parameter.*pixels"):
        profile("render", {"pixels": 3}, out=tmp_path / "x", log=None)
    with pytest.raises(ValueError, match="repeats"):
        profile("render", repeats=0, out=tmp_path / "x", log=None)
    with pytest.raises(ValueError, match="no profile run at"):
        profiling.diff(tmp_path / "missing", render_run.run_dir)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no metadata.json"):
        profiling.diff(render_run.run_dir, tmp_path / "empty")


def test_mismatched_runs_are_refused(render_run: profiling.ProfileRun, tmp_path) -> None:
    other = profile(_sleepy(None, 0.001), out=tmp_path / "sleepy", pyspy_enabled=False, **FAST)
    with pytest.raises(ValueError, match="different workloads: before 'render', after 'test:sleepy'"):
        profiling.diff(render_run.run_dir, other.run_dir)
    copy = tmp_path / "copy"
    shutil.copytree(render_run.run_dir, copy)
    meta = json.loads((copy / "metadata.json").read_text())
    meta["parameters"]["num"] = 3000
    meta["parameters"]["backend"] = "other"  # backend may differ: not named
    (copy / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"differ in parameters: num: before 1500, after 3000$"):
        profiling.diff(render_run.run_dir, copy)
    # a setting only one revision has (e.g. a new training option) is a warning naming it, not a refusal
    meta["parameters"]["num"] = 1500
    meta["parameters"]["new_option"] = []
    (copy / "metadata.json").write_text(json.dumps(meta))
    warned = profiling.diff(render_run.run_dir, copy, out=tmp_path / "diff").warnings  # not into results/
    assert any("parameter new_option only after ([])" in w for w in warned)


def test_cli_profile_and_errors(render_run: profiling.ProfileRun, tmp_path, capsys) -> None:
    assert main(["profile", "nope"]) == 2
    assert "unknown workload 'nope'" in capsys.readouterr().err
    assert main(["profile", "diff", str(tmp_path / "a")]) == 2
    assert "two run folders" in capsys.readouterr().err
    assert main(["profile", "diff", str(tmp_path / "a"), str(render_run.run_dir)]) == 2
    assert "no profile run at" in capsys.readouterr().err
    out = tmp_path / "cli"
    code = main(["profile", "field", "-p", "N", "50", "-p", "B", "500", "-p", "backend", "torch", "--repeats", "2",
                 "--no-pyspy", "--out", str(out)])  # fmt: skip
    assert code == 0 and (out / "stages.csv").is_file()
    assert "top 15 ops" in capsys.readouterr().out
    assert main(["profile", "diff", str(out), str(out), "--out", str(tmp_path / "d")]) == 0
    assert "significant changes: none" in capsys.readouterr().out
