"""Times benchmark cases with ``torch.utils.benchmark``: warm-up, then median, IQR and count.

Cases that differ only in their ``backend``, ``compile`` mode or ``schedule`` (the comparisons the
suites make, e.g. ``ext`` against the ``torch`` reference on one input, eager against torch.compile,
training with and without a resolution schedule) are timed together in interleaved rounds: round r
times a block of calls of each in turn. A drift in the machine's speed
during the run (frequency, neighbours on a shared host) then affects each alike, so their ratio stays
meaningful. Cases that measure themselves (``Case.measured``, runs of minutes) are interleaved slice
by slice instead (:func:`run_measured`).

Counts (``threads``, ``runs``, ``calls_per_run``) are integer columns (empty for skipped cases). A case
slow enough to get a single round has no spread: its ``iqr_s`` is empty (NaN), not 0.

One timing loop (:func:`time_blocks`: warm-up, block sizes, rounds), one timer
(``torch.utils.benchmark.Timer``, here and in the revision worker, which the loop drives over a pipe)
and one statistics function (:func:`timing_stats`, over ``torch.utils.benchmark.Measurement``) serve
every suite, the notebooks' measurements and ``gsworkbench compare --revisions``. A case's setup returns the callable
with its extra columns (:class:`~gsworkbench.bench.registry.Prepared`); they join its row.
"""

from __future__ import annotations

import gc
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import pandas as pd
import torch
from torch.utils import benchmark

from gsworkbench.bench.ceilings import run_ceilings
from gsworkbench.bench.registry import Case, get_suite, prepared
from gsworkbench.bench.roofline import add_roofline_columns

ROUNDS = 10
COUNT_COLUMNS = ("threads", "runs", "calls_per_run")
_SAMPLES_TASK = benchmark.utils.common.TaskSpec(stmt="fn()", setup="pass")


def timing_stats(samples_s: Sequence[float], calls_per_run: int = 1) -> dict[str, Any]:
    """The statistics of one case's per-call times, one sample per round (seconds): ``median_s``,
    ``iqr_s`` (NaN from a single round: no spread to report, not 0), ``runs``, ``calls_per_run`` and
    the ``samples_s`` themselves, by ``torch.utils.benchmark.Measurement``."""
    samples = [float(t) for t in samples_s]
    if not samples:
        raise ValueError("timing_stats needs at least one sample")
    m = benchmark.Measurement(number_per_run=1, raw_times=samples, task_spec=_SAMPLES_TASK)
    iqr = m.iqr if len(samples) > 1 else math.nan
    return {"median_s": m.median, "iqr_s": iqr, "runs": len(samples), "calls_per_run": calls_per_run,
            "samples_s": samples}  # fmt: skip


def default_threads() -> int:
    """``$GSW_BENCH_THREADS``, else every core torch sees."""
    return int(os.environ.get("GSW_BENCH_THREADS", torch.get_num_threads()))


class BlockTimer(Protocol):
    """What the timing loop needs of a timed callable: an untimed call, and the seconds per call of a
    block of ``number`` calls. In-process: :class:`LocalTimer`; the revision worker's, over a pipe."""

    def call(self) -> None: ...

    def time_block(self, number: int) -> float: ...


class LocalTimer:
    """A :class:`BlockTimer` of ``fn`` in this process, by ``torch.utils.benchmark.Timer``; ``clock``:
    the timer's clock in seconds (default ``timeit.default_timer``)."""

    def __init__(self, fn: Callable[[], Any], threads: int, clock: Callable[[], float] | None = None) -> None:
        extra = {} if clock is None else {"timer": clock}
        self.fn = fn
        self.timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads, **extra)

    def call(self) -> None:
        self.fn()

    def time_block(self, number: int) -> float:
        return self.timer.timeit(number).median


def time_blocks(
    timers: Sequence[BlockTimer], *, min_run_time: float = 0.5, warmup: int = 2, rounds: int = ROUNDS,
    alternate: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    """The timing loop: median, IQR (seconds per call), counts and raw samples of each timer, timed in
    interleaved blocks (what :func:`time_interleaved` and ``compare --revisions`` both time with).

    Each gets about ``min_run_time`` seconds in all: a block of calls per round, sized from one timed
    call after the warm-up (at least one call per block). There are ``rounds`` rounds, fewer (down to
    one) when the slowest single call exceeds ``min_run_time / rounds``; a call slower than
    ``min_run_time`` gets no further warm-up. ``samples_s`` lists every round's seconds per call (the
    block's time over its calls), in round order: what :mod:`gsworkbench.bench.significance` tests. ``alternate``:
    every other round runs the timers in reverse order (ABBA), so that a drift hits the first and the
    last alike.
    """
    ones = []
    for t in timers:
        one = t.time_block(1)  # first call: a warm-up, and the size of the blocks if it is slow
        if one < min_run_time:
            for _ in range(warmup - 1):
                t.call()
            one = t.time_block(1)
        ones.append(max(one, 1e-9))
    if not timers:
        return []
    rounds = max(1, min(rounds, int(min_run_time / max(ones))))
    numbers = [max(1, int(min_run_time / rounds / one)) for one in ones]
    per_call: list[list[float]] = [[] for _ in timers]
    for r in range(rounds):
        order = reversed(range(len(timers))) if alternate and r % 2 else range(len(timers))
        for k in order:
            per_call[k].append(timers[k].time_block(numbers[k]))
    return [timing_stats(times, numbers[k]) for k, times in enumerate(per_call)]


def time_interleaved(
    fns: list[Callable[[], Any]], *, threads: int, min_run_time: float = 0.5, warmup: int = 2, rounds: int = ROUNDS,
    single_calls: int | None = None, clock: Callable[[], float] | None = None,
) -> list[dict[str, float]]:
    """Median, IQR (seconds per call), counts and raw samples of each ``fn()``, timed in interleaved
    blocks by :func:`time_blocks` (see there).

    ``single_calls=K`` times K single calls of each fn instead (K rounds of one call, after ``warmup``
    calls; ``min_run_time`` unused): the median and spread of individual calls, for microsecond calls
    whose cost is the point (the ``overhead`` suite). ``Timer.timeit(1)`` runs two untimed calls before
    the timed one, so every sample is a warm call.

    ``clock``: the timer's clock in seconds (default ``timeit.default_timer``); tests pass a fake one
    that the timed calls advance, so their statistics do not depend on the machine's load.
    """
    if not fns:
        return []
    timers = [LocalTimer(fn, threads, clock) for fn in fns]
    if single_calls is not None:
        for fn in fns:
            for _ in range(warmup):
                fn()
        per_call: list[list[float]] = [[] for _ in fns]
        for _ in range(single_calls):
            for k, timer in enumerate(timers):
                per_call[k].append(timer.time_block(1))
        return [timing_stats(times, 1) for times in per_call]
    return time_blocks(timers, min_run_time=min_run_time, warmup=warmup, rounds=rounds)


# params whose values are timed against each other, interleaved (the converge suite's variants: its
# schedule, initial scale, preset, and the preset's overrides on the bricks scene)
COMPARED = ("backend", "compile", "schedule", "init_scale", "preset", "variant", "overrides", "iterations")


def run_measured(fns: list[Callable[[], bool]]) -> list[dict[str, Any]]:
    """Runs cases that measure themselves (:attr:`~gsworkbench.bench.registry.Case.measured`): calls each
    ``fn()`` in turn, one slice of its work per call, until every one has returned True, so that a drift
    in the machine's speed hits each alike. Returns an empty result per fn: their columns are their extras."""
    active = list(range(len(fns)))
    while active:
        active = [k for k in active if not fns[k]()]
    return [{} for _ in fns]


def _comparison_groups(cases: list[Case]) -> list[list[int]]:
    """Indices of the cases grouped by their params other than :data:`COMPARED`, in order of appearance."""
    groups: dict[tuple, list[int]] = {}
    for i, case in enumerate(cases):
        key = tuple(sorted((k, repr(v)) for k, v in case.params.items() if k not in COMPARED))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def run_cases(
    cases: Iterable[Case], *, threads: int | None = None, min_run_time: float = 0.5, progress: bool = True,
    clock: Callable[[], float] | None = None,
) -> pd.DataFrame:
    """Runs each case (comparable cases interleaved); one row per case, in the given order: its params,
    timings, threads and skip reason. ``clock``: see :func:`time_interleaved`."""
    threads = threads or default_threads()
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    cases = list(cases)
    rows: dict[int, dict[str, Any]] = {}
    done = 0
    try:
        for group in _comparison_groups(cases):
            timed = [i for i in group if not cases[i].skip]
            measured = {cases[i].measured for i in timed}
            if len(measured) > 1:
                raise ValueError(f"cases {[cases[i].name for i in timed]} mix measured and timed cases")
            preps = [prepared(cases[i].setup()) for i in timed]
            single = cases[group[0]].single_calls
            if measured == {True}:
                results = run_measured([p.fn for p in preps])
            else:
                results = time_interleaved([p.fn for p in preps], threads=threads, min_run_time=min_run_time,
                                           single_calls=single, warmup=20 if single else 2, clock=clock)  # fmt: skip
            for prep, res in zip(preps, results):  # the case's extra columns (after the timing: they may
                res.update(prep.extra_columns())  # summarise the timed calls, e.g. stage medians)
            del preps
            gc.collect()
            timings = dict(zip(timed, results))
            for i in group:
                case = cases[i]
                row: dict[str, Any] = {"case": case.name, **case.params, "threads": threads}
                if case.skip:
                    row.update(skipped=case.skip)
                else:
                    row.update(timings[i])
                rows[i] = row
                done += 1
                if progress:
                    t = row.get("median_s")
                    shown = f"{t * 1e3:10.3f} ms" if t is not None else f"skipped: {row.get('skipped')}"
                    shown = "measured" if case.measured and not case.skip else shown
                    print(f"[{done}/{len(cases)}] {case.name:<60} {shown}", file=sys.stderr, flush=True)
    finally:
        torch.set_num_threads(prev)
    df = pd.DataFrame([rows[i] for i in range(len(cases))])
    for col in COUNT_COLUMNS:
        if col in df:
            df[col] = df[col].astype("Int64")
    return df


def run_suite(
    name: str, *, quick: bool = False, threads: int | None = None, min_run_time: float = 0.5, progress: bool = True,
    cases: str | None = None,
) -> pd.DataFrame:
    """Runs suite ``name`` (only the cases whose name matches the regular expression ``cases``, when
    given) and returns its summarised table, with the roofline columns of the cases that count their work
    (:func:`gsworkbench.bench.roofline.add_roofline_columns`, against the run's ceilings:
    :func:`gsworkbench.bench.ceilings.run_ceilings`, measured once per process and thread count)."""
    import re

    suite = get_suite(name)
    selected = suite.cases(quick)
    if cases:
        try:
            pattern = re.compile(cases)
        except re.error as err:
            raise ValueError(f"--cases: not a regular expression: {cases!r} ({err})") from None
        selected = [c for c in selected if pattern.search(c.name)]
        if not selected:
            names = ", ".join(c.name for c in suite.cases(quick)[:6])
            raise ValueError(f"--cases {cases!r} matches no case of suite {name!r} (names look like: {names}, ...)")
    threads = threads or default_threads()
    ceilings = run_ceilings(threads)
    df = run_cases(selected, threads=threads, min_run_time=min_run_time, progress=progress)
    return add_roofline_columns(suite.summarize(df), ceilings)
