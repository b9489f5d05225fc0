"""``profile(workload)``: stage breakdown, op table, trace, flamegraph and overheads in one run folder.

Order of work: set the workload up; ``warmup`` runs (not recorded); ``repeats`` plain runs (the stage
breakdown and the reference wall time); one run under ``torch.profiler`` (op table, chrome trace);
runs sampled by py-spy: a first one, then ``sample_s`` seconds' worth (flamegraph). Comparing the
profiled runs' wall times with the plain runs' median gives each profiler's overhead; for py-spy the
median of its runs after the first, and the first apart (with ``--native`` py-spy resolves the
libraries' symbols during it).

Files in ``results/<run-id>/`` (or ``out``), each written atomically:

- ``metadata.json``: workload, parameters, settings, environment (commit, versions, CPU, threads), py-spy status;
- ``repeats.csv`` (repeat, stage, seconds), ``stages.csv`` (:func:`~gsworkbench.profiling.stages.stage_table`
  plus ``profiler_s``), ``stages.png``;
- ``ops.csv`` (``torch.profiler`` key averages), ``trace.json.gz`` (chrome trace, gzipped JSON; Perfetto opens it);
- ``profile.speedscope.json`` (py-spy, ``--native``, every thread), ``stacks.folded`` and ``flamegraph.svg``
  (the samples of the thread that ran the workload; ``metadata.json``'s ``pyspy_threads`` lists the
  threads left out, e.g. a Jupyter kernel's IOPub and heartbeat threads, with their samples);
- ``overhead.csv``: wall time per run without a profiler, under torch.profiler, under py-spy (median).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from gsworkbench.core.atomic import atomic_write_text, write_table
from gsworkbench.core.figures import save_figure
from gsworkbench.core.provenance import machine_summary
from gsworkbench.core.runs import new_run_dir, write_metadata
from gsworkbench.profiling import flamegraph, op_table, pyspy, quiet, stages
from gsworkbench.profiling.counters import hardware_counters_status
from gsworkbench.profiling.workloads import Workload, make_workload

KIND = "gsworkbench-profile-v1"
FILES = {
    "repeats": "repeats.csv",
    "stages": "stages.csv",
    "stages_png": "stages.png",
    "ops": "ops.csv",
    "trace": "trace.json.gz",
    "speedscope": "profile.speedscope.json",
    "folded": "stacks.folded",
    "flamegraph": "flamegraph.svg",
    "overhead": "overhead.csv",
}


@dataclass
class ProfileRun:
    """A profile, fresh or loaded from its folder. ``folded`` is None when py-spy did not run."""

    run_dir: Path
    metadata: dict[str, Any]
    repeats: pd.DataFrame
    stages: pd.DataFrame
    ops: pd.DataFrame
    overhead: pd.DataFrame
    folded: Counter[str] | None

    @property
    def workload(self) -> str:
        return str(self.metadata["workload"])

    @property
    def label(self) -> str:
        backend = self.metadata["parameters"].get("backend")
        return f"{self.workload} [{backend}]" if backend else self.workload

    def file(self, key: str) -> Path:
        return self.run_dir / FILES[key]


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")[:40] or "workload"


def _check_count(name: str, value: object, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {value!r}")
    return value


def profile(
    workload: str | Workload | Callable[..., Any],
    params: Mapping[str, Any] | None = None,
    *,
    repeats: int = 7,
    warmup: int = 1,
    rate: int = 100,
    sample_s: float = 3.0,
    pyspy_enabled: bool = True,
    native: bool = True,
    record_shapes: bool = False,
    out: str | os.PathLike[str] | None = None,
    top: int = 15,
    log: Callable[[str], None] | None = print,
    show_summary: bool = True,
) -> ProfileRun:
    """Profiles ``workload`` (a spec such as ``"train:micro"``, ``"render"``, ``"field"`` with
    ``params``; a :class:`Workload`; or a callable) and writes everything to ``out`` (default: a new
    ``results/<run-id>/``). ``rate``: py-spy samples per second; py-spy samples a first run, then whole
    runs until ``sample_s`` more seconds have passed (at least one). ``log``: where progress and the
    summary go (None: silent); ``show_summary=False`` leaves the summary tables out (a notebook shows
    them itself). torch.profiler's own progress lines on stderr are dropped (:mod:`.quiet`). Returns the
    :class:`ProfileRun`."""
    wl = make_workload(workload, params)
    _check_count("repeats", repeats, 1)
    _check_count("warmup", warmup, 0)
    _check_count("rate", rate, 1)
    _check_count("top", top, 1)
    if isinstance(sample_s, bool) or not isinstance(sample_s, (int, float)) or not sample_s >= 0:
        raise ValueError(f"sample_s must be a number >= 0 (seconds), got {sample_s!r}")
    say = log or (lambda _msg: None)
    run_dir = Path(out) if out is not None else new_run_dir(f"profile-{_slug(wl.name)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    settings = dict(
        repeats=repeats, warmup=warmup, rate=rate, sample_s=sample_s, native=native, record_shapes=record_shapes,
        device=wl.device, threads=torch.get_num_threads(),
    )  # fmt: skip
    meta: dict[str, Any] = dict(kind=KIND, workload=wl.name, settings=settings, status="running")
    write_metadata(run_dir, wl.params, **meta)
    say(f"profiling {wl.name} -> {run_dir}")

    fn = wl.setup()
    for _ in range(warmup):
        stages.timed_run(fn, wl.device)
    say(f"  {repeats} timed run(s)")
    reps = stages.time_repeats(fn, repeats, wl.device)
    write_table(run_dir / FILES["repeats"], reps)

    say("  one run under torch.profiler")
    with quiet.filtered_stderr():  # kineto's "USDT: ... profiler_start/stop" lines
        op_tab, wall_torch = op_table.profile_ops(fn, wl.device, record_shapes, run_dir / FILES["trace"])
    write_table(run_dir / FILES["ops"], op_tab)
    table = stages.add_profiler_ranges(stages.stage_table(reps, wl.stages), op_tab)
    write_table(run_dir / FILES["stages"], table)

    folded, pyspy_status, spy_walls = None, "not asked for", [float("nan")]
    # the flamegraph shows the thread that runs the workload; a kernel's idle threads are left out
    workload_thread, workload_thread_name = threading.get_native_id(), threading.current_thread().name
    if pyspy_enabled:
        say(f"  one run, then runs for {sample_s:g} s, sampled by py-spy at {rate} Hz{' (--native)' if native else ''}")
        try:
            with pyspy.pyspy_recording(run_dir / FILES["speedscope"], rate=rate, native=native):
                spy_walls = [stages.timed_run(fn, wl.device)[0]]  # the first run: attach, symbol loading
                t0 = time.perf_counter()
                while len(spy_walls) < 2 or time.perf_counter() - t0 < sample_s:
                    spy_walls.append(stages.timed_run(fn, wl.device)[0])
            doc = json.loads((run_dir / FILES["speedscope"]).read_text())
            folded, left_out = pyspy.one_thread_folded(doc, workload_thread, rate)
            flamegraph.write_folded(run_dir / FILES["folded"], folded)
            title = f"{wl.name} [{wl.params.get('backend', '')}]"
            note = pyspy.left_out_note(sum(folded.values()), left_out)
            if note:
                say(f"  {note}")
            sub = f"{sum(folded.values())} samples of {workload_thread_name} (the workload's thread)" + (
                f"; {note}" if note else "")  # fmt: skip
            svg = flamegraph.flamegraph_svg(folded, title=f"py-spy flamegraph: {title}", subtitle=sub)
            meta["pyspy_threads"] = {"sampled": f"{workload_thread_name} ({workload_thread})", "left_out": left_out}
            atomic_write_text(run_dir / FILES["flamegraph"], svg)
            pyspy_status = "ok" if folded else "ok, but no samples (raise the rate or lengthen the run)"
        except pyspy.PySpyUnavailable as err:
            pyspy_status = str(err)
            say(f"  NOTE: {err}; the torch.profiler outputs are written")

    plain = float(reps.loc[reps.stage == stages.TOTAL, "seconds"].median())
    spy_ok, nan = pyspy_status.startswith("ok"), float("nan")
    spy = f"py-spy {rate} Hz{' --native' if native else ''}"
    overhead = pd.DataFrame(
        {
            "mode": ["no profiler", "torch.profiler", spy, f"{spy}, first run (attach, symbol loading)"],
            "wall_s": [plain, wall_torch, float(np.median(spy_walls[1:])) if len(spy_walls) > 1 else nan, spy_walls[0]],
            "runs": [repeats, 1, len(spy_walls) - 1 if spy_ok else 0, 1 if spy_ok else 0],
        }
    )
    overhead["overhead_pct"] = 100 * (overhead["wall_s"] / plain - 1)
    write_table(run_dir / FILES["overhead"], overhead)

    label = f"{wl.name} [{wl.params.get('backend', '')}]"
    title = f"{wl.name}: median time per run over {repeats} run(s)"
    fig = stages.plot_stages({label: table}, title, machine_summary(wl.device))
    save_figure(run_dir / FILES["stages_png"], fig)
    import matplotlib.pyplot as plt

    plt.close(fig)
    cov = stages.coverage(reps)
    meta.update(status="done", pyspy=pyspy_status, coverage_min=float(cov.min()), finished=time.time(),
                hardware_counters=hardware_counters_status()[1])  # fmt: skip
    write_metadata(run_dir, wl.params, **meta)
    result = ProfileRun(run_dir, _read_json(run_dir / "metadata.json"), reps, table, op_tab, overhead, folded)
    if show_summary:
        say(summary(result, top))
    else:
        say(f"  done: {run_dir}")
    return result


def summary(run: ProfileRun, top: int = 15) -> str:
    """The stage table, the top ``top`` ops, the overheads and the files, as text."""
    fmt = {"float_format": lambda v: f"{v:.4g}", "index": False}
    parts = [f"\n== {run.label}: stages (seconds per run) ==", run.stages.to_string(**fmt)]
    cov = stages.coverage(run.repeats)
    parts.append(f"named stages cover {100 * cov.min():.1f}-{100 * cov.max():.1f}% of the wall time")
    parts += [f"\n== top {top} ops by self time (torch.profiler, one run) ==",
              op_table.top_ops(run.ops, top).to_string(**fmt)]  # fmt: skip
    parts += ["\n== profiler overhead (wall seconds per run) ==", run.overhead.to_string(**fmt)]
    parts.append(f"\npy-spy: {run.metadata.get('pyspy')}")
    counters = run.metadata.get("hardware_counters")
    if counters:
        hint = ""
        if "unavailable" in counters:
            hint = ("; what explains a kernel far below its roofline here is the stage table, and its scaling from "
                    "1 to 2 threads (profile with OMP_NUM_THREADS=1 and 2, then profile diff)")
        parts.append(counters + hint)
    threads = run.metadata.get("pyspy_threads")
    if threads and run.folded is not None:
        note = pyspy.left_out_note(sum(run.folded.values()), threads.get("left_out", {}))
        parts.append(f"flamegraph: the samples of {threads['sampled']}" + (f"; {note}" if note else ""))
    parts.append(f"files: {run.run_dir}/ ({', '.join(sorted(p.name for p in run.run_dir.iterdir() if p.is_file()))})")
    return "\n".join(parts)


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def load_profile(run_dir: str | os.PathLike[str]) -> ProfileRun:
    """A profile run folder written by :func:`profile`; ValueError naming what is missing."""
    d = Path(run_dir)
    if not d.is_dir():
        raise ValueError(f"no profile run at {d}: not a directory")
    meta_path = d / "metadata.json"
    if not meta_path.is_file():
        raise ValueError(f"{d} is not a profile run: it has no metadata.json")
    try:
        meta = _read_json(meta_path)
    except json.JSONDecodeError as err:
        raise ValueError(f"{meta_path} is not valid JSON: {err}") from None
    if meta.get("kind") != KIND:
        raise ValueError(f"{d} is not a profile run (metadata kind {meta.get('kind')!r}, expected {KIND!r})")
    if meta.get("status") != "done":
        raise ValueError(f"the profile run at {d} did not finish (status {meta.get('status')!r})")
    tables = {}
    for key in ("repeats", "stages", "ops", "overhead"):
        path = d / FILES[key]
        if not path.is_file():
            raise ValueError(f"the profile run at {d} lacks {FILES[key]}")
        tables[key] = pd.read_csv(path)
    folded_path = d / FILES["folded"]
    folded = flamegraph.read_folded(folded_path) if folded_path.is_file() else None
    return ProfileRun(d, meta, tables["repeats"], tables["stages"], tables["ops"], tables["overhead"], folded)


__all__ = ["FILES", "KIND", "ProfileRun", "load_profile", "profile", "summary"]
