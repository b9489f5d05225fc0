"""Two git revisions, each in its own worktree, timed case by case in interleaved rounds.

``compare_revisions("HEAD~3", "HEAD", "field", suites_module="gsworkbench.studies.suites")`` checks both
revisions out with ``git worktree add --detach`` under ``build/revisions/<sha>/`` (kept, so a revision
is built once), builds each one's extension (``setup.py build_ext --inplace``, ``MAX_JOBS`` default 1)
unless ``build=False``, and starts one worker process per revision (``_revision_worker.py``, importing
that revision's package). For every case, both workers set it up, then rounds alternate between them in
ABBA order (A B, B A, ...), so a drift in the machine's speed hits both alike. The samples are written
as two ordinary benchmark runs (``results/<run-id>/``, the revision's commit in ``git_commit``), which
:func:`compare_runs` reads, each with the roofline columns of the cases that count their work (the
case's extras, from its worker) against the machine's ceilings, measured once by the driver at the run's
thread count.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pandas as pd

from gsworkbench.bench.ceilings import MachineCeilings, ceilings_metadata
from gsworkbench.bench.roofline import add_roofline_columns
from gsworkbench.bench.runner import ROUNDS, time_blocks
from gsworkbench.core.atomic import write_json, write_table
from gsworkbench.core.project import PACKAGE_CHECKOUT
from gsworkbench.core.provenance import environment
from gsworkbench.core.runs import new_run_dir

WORKER = Path(__file__).with_name("_revision_worker.py")


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if out.returncode:
        raise ValueError(f"git {' '.join(args)} failed: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


def resolve_revision(rev: str, repo: str | os.PathLike[str] = PACKAGE_CHECKOUT) -> str:
    """The full commit hash of ``rev``; ValueError naming it when git does not know it."""
    try:
        return _git(Path(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except ValueError:
        raise ValueError(f"unknown git revision {rev!r} in {repo}") from None


def prepare_revision(
    rev: str,
    repo: str | os.PathLike[str] = PACKAGE_CHECKOUT,
    cache: str | os.PathLike[str] | None = None,
    build: bool = True,
) -> Path:
    """A worktree of ``rev`` (reused when present), its extension built when ``build``; returns its path."""
    repo = Path(repo)
    sha = resolve_revision(rev, repo)
    path = Path(cache) if cache is not None else repo / "build" / "revisions"
    path = path / sha[:12]
    if not (path / ".git").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _git(repo, "worktree", "add", "--detach", str(path), sha)
    if build and (path / "setup.py").exists() and not list((path / "gsworkbench").glob("_C*.so")):
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "MAX_JOBS": os.environ.get("MAX_JOBS", "1")}
        print(f"building the extension of {rev} ({sha[:10]}) in {path} ...", file=sys.stderr, flush=True)
        out = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace"], cwd=path, env=env, capture_output=True, text=True
        )
        if out.returncode:
            raise RuntimeError(f"building {rev} failed:\n{out.stderr[-3000:]}")
    return path


class _Worker:
    """One revision's worker process; ``ask`` sends a request and returns the reply."""

    def __init__(self, label: str, tree: Path, suite: str, suites_module: str, quick: bool, threads: int) -> None:
        self.label = label
        self.tree = tree
        self.extension: str | None = None  # where the worker's gsworkbench._C came from
        env = {**os.environ, "PYTHONPATH": str(tree), "OMP_WAIT_POLICY": "PASSIVE", "GSW_BENCH_THREADS": str(threads)}
        args = [sys.executable, "-c", WORKER.read_text(), suite, "1" if quick else "0", str(threads), suites_module]
        self.proc = subprocess.Popen(args, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} worker exited (code {self.proc.wait()}); see its stderr above")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.label}: {req.get('case', req['op'])}: {reply['error']}")
        return reply

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


class _RemoteTimer:
    """The runner's :class:`~gsworkbench.bench.runner.BlockTimer` of the case a worker has set up."""

    def __init__(self, worker: _Worker) -> None:
        self.worker = worker

    def call(self) -> None:
        self.worker.ask(op="call")

    def time_block(self, number: int) -> float:
        return float(self.worker.ask(op="time", number=number)["per_call"])


def time_revisions(
    workers: list[_Worker], *, min_run_time: float = 0.5, rounds: int = ROUNDS, progress: bool = True,
    cases: str | None = None,
) -> list[list[dict[str, Any]]]:  # fmt: skip
    """Rows (case, params, timings, samples) per worker, every case timed in ABBA-interleaved rounds;
    ``cases``: a regular expression, only the cases whose name it matches (re.search)."""
    replies = [w.ask(op="list") for w in workers]
    for w, reply in zip(workers, replies):
        w.extension = reply.get("extension")
    listed = [{c["name"]: c for c in reply["cases"]} for reply in replies]
    if cases is not None:
        pattern = re.compile(cases)
        listed = [{n: c for n, c in by_name.items() if pattern.search(n)} for by_name in listed]
        if not listed[0]:
            raise ValueError(f"--cases {cases!r} matches no case of the suite")
    names = list(listed[0])
    for w, cases in zip(workers[1:], listed[1:]):
        if list(cases) != names:
            diff = sorted(set(names) ^ set(cases))[:5]
            raise ValueError(f"the revisions' suites have different cases ({workers[0].label} vs {w.label}): {diff}")
    out: list[list[dict[str, Any]]] = [[] for _ in workers]
    for i, name in enumerate(names):
        skips = [cases[name]["skip"] for cases in listed]
        rows = [{"case": name, "params": cases[name]["params"]} for cases in listed]
        if any(skips):
            for row, skip in zip(rows, skips):
                row["skipped"] = skip or f"skipped in the other revision: {next(s for s in skips if s)}"
        else:
            for w in workers:
                w.ask(op="setup", case=name)
            timings = time_blocks([_RemoteTimer(w) for w in workers], min_run_time=min_run_time, rounds=rounds,
                                  alternate=True)  # fmt: skip
            for row, timing, w in zip(rows, timings, workers):
                row.update(timing)
                row.update(w.ask(op="extras")["extras"])  # work counts, intersections, ... (the case's extras)
        for k, row in enumerate(rows):
            out[k].append(row)
        if progress:
            shown = "  ".join(f"{w.label}: {r.get('median_s', float('nan')) * 1e3:.3f} ms"
                              for w, r in zip(workers, rows))  # fmt: skip
            print(f"[{i + 1}/{len(names)}] {name:<50} {shown}", file=sys.stderr, flush=True)
    return out


def compare_revisions(
    baseline: str,
    candidate: str,
    suite: str,
    *,
    suites_module: str,
    quick: bool = False,
    threads: int = 1,
    min_run_time: float = 0.5,
    build: bool = True,
    repo: str | os.PathLike[str] = PACKAGE_CHECKOUT,
    cache: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    progress: bool = True,
    cases: str | None = None,
) -> tuple[Path, Path]:
    """Times ``suite`` (its cases matching the regular expression ``cases``, or all) at both revisions,
    interleaved case by case; returns the two run folders. ``suites_module``: the dotted name of the module
    whose import registers the suites in a revision (``"gsworkbench.studies.suites"``; a revision without
    it finds its suites the way its own registry does)."""
    trees = [prepare_revision(rev, repo, cache, build) for rev in (baseline, candidate)]
    shas = [resolve_revision(rev, repo) for rev in (baseline, candidate)]
    labels = [f"baseline {baseline}", f"candidate {candidate}"]
    workers = [_Worker(label, tree, suite, suites_module, quick, threads) for label, tree in zip(labels, trees)]
    try:
        tables = time_revisions(workers, min_run_time=min_run_time, progress=progress, cases=cases)
    finally:
        for w in workers:
            w.close()
    env = environment()
    ceilings = ceilings_metadata(threads)  # one measurement for both runs (cached per thread count)
    measured = MachineCeilings.from_dict(ceilings)  # None where they were skipped
    run_dirs = []
    # one id for both runs: their samples were timed round by round together (compare's paired test)
    pair_id = uuid.uuid4().hex
    for role, rev, sha, tree, rows, worker in zip(("baseline", "candidate"), (baseline, candidate), shas, trees,
                                                  tables, workers):  # fmt: skip
        run_dir = new_run_dir(f"bench-{suite}-rev", root)
        params = {"suite": suite, "quick": quick, "threads": threads, "min_run_time": min_run_time, "revision": rev,
                  "cases": cases}  # fmt: skip
        ext = {"built": bool(list((tree / "gsworkbench").glob("_C*.so"))), "loaded_from": worker.extension}
        meta = {**env, "parameters": params, "suite": suite, "git_commit": sha, "git_dirty": False, "extension": ext,
                "ceilings": ceilings, "interleaved": {"id": pair_id, "role": role}}  # fmt: skip
        if worker.extension and not Path(worker.extension).resolve().is_relative_to(tree.resolve()):
            meta["warnings"] = [f"{rev}: gsworkbench._C was loaded from {worker.extension}, outside its worktree "
                                "(an installed build, not this revision's): its ext timings are not the revision's"]
        meta["worktree"] = str(tree)
        write_json(run_dir / "metadata.json", meta)
        table = add_roofline_columns(pd.DataFrame(rows).assign(threads=threads), measured)
        write_table(run_dir / f"{suite}.csv", table)
        run_dirs.append(run_dir)
    return run_dirs[0], run_dirs[1]
