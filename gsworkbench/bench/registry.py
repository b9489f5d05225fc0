"""Benchmark cases and the registry of suites."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

Extras = Mapping[str, Any]


@dataclass
class Prepared:
    """What a case's setup returns: ``fn``, the zero-argument callable to time, and ``extras``, more
    columns for the case's row (e.g. tile intersections, first-call peak memory): a mapping, or a
    callable returning one that the runner calls after the timing (e.g. stage medians over the timed
    calls)."""

    fn: Callable[[], Any]
    extras: Extras | Callable[[], Extras] = field(default_factory=dict)

    def extra_columns(self) -> dict[str, Any]:
        """The extras as a dict (calling ``extras`` when it is a callable)."""
        return dict(self.extras() if callable(self.extras) else self.extras)


def prepared(result: Prepared | Callable[[], Any]) -> Prepared:
    """A setup's result as :class:`Prepared` (a bare callable: no extras)."""
    if isinstance(result, Prepared):
        return result
    if not callable(result):
        raise TypeError(f"a case's setup must return a Prepared or a callable, got {type(result).__name__}")
    return Prepared(result)


@dataclass
class Case:
    """One timed configuration.

    ``setup()`` builds the inputs and returns a :class:`Prepared`: the zero-argument callable to time
    with the case's extra columns (a bare callable is taken as one without extras); it runs once,
    outside the timing. ``params`` become columns of the results table (backend, sizes, mode, ...).
    ``skip`` holds a reason when the case cannot run here (e.g. over a memory budget); it is then
    recorded in the table, not timed. ``single_calls=K`` times K single calls (median and spread of
    individual calls, for microsecond calls) instead of blocks sized by the run time
    (:func:`gsworkbench.bench.runner.time_interleaved`). ``measured=True``: the case measures itself
    (work of minutes, e.g. the ``converge`` suite's training runs to a target PSNR): its ``fn()`` does
    one slice of the work and returns True once the case is finished, the runner interleaves the slices
    of comparable cases (:func:`gsworkbench.bench.runner.run_measured`) and times nothing itself; the
    row's results are the extras.
    """

    name: str
    params: dict[str, Any]
    setup: Callable[[], Prepared | Callable[[], Any]]
    skip: str | None = None
    single_calls: int | None = None
    measured: bool = False


@dataclass
class Suite:
    """A named list of cases, and a summary that derives columns (speedups, throughput) from timings."""

    name: str
    description: str
    cases: Callable[[bool], list[Case]]  # cases(quick) -> cases
    summarize: Callable[[pd.DataFrame], pd.DataFrame] = field(default=lambda df: df)


_SUITES: dict[str, Suite] = {}


def register_suite(
    name: str, description: str, summarize: Callable[[pd.DataFrame], pd.DataFrame] | None = None
) -> Callable[[Callable[[bool], list[Case]]], Callable[[bool], list[Case]]]:
    """Decorator: registers ``fn(quick) -> list[Case]`` as suite ``name``."""

    def deco(fn: Callable[[bool], list[Case]]) -> Callable[[bool], list[Case]]:
        _SUITES[name] = Suite(name, description, fn, summarize or (lambda df: df))
        return fn

    return deco


def list_suites() -> dict[str, Suite]:
    """The registered suites, by name (the built-in ones register when :mod:`gsworkbench.studies.suites`
    is imported)."""
    return dict(sorted(_SUITES.items()))


def get_suite(name: str) -> Suite:
    """The suite called ``name``; ValueError listing the known ones otherwise."""
    suites = list_suites()
    if name not in suites:
        raise ValueError(f"unknown benchmark suite {name!r}; known: {', '.join(suites) or 'none'}")
    return suites[name]
