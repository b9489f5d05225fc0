"""Benchmark cases and the registry of suites."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class Case:
    """One timed configuration.

    ``setup()`` builds the inputs and returns the zero-argument callable to time; it runs once, outside
    the timing. ``params`` become columns of the results table (backend, sizes, mode, ...).
    ``skip`` holds a reason when the case cannot run here (e.g. over a memory budget); it is then
    recorded in the table, not timed.
    """

    name: str
    params: dict[str, Any]
    setup: Callable[[], Callable[[], Any]]
    skip: str | None = None


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


def _discover() -> None:
    from gsworkbench.bench import suites

    for mod in pkgutil.iter_modules(suites.__path__):
        importlib.import_module(f"{suites.__name__}.{mod.name}")


def list_suites() -> dict[str, Suite]:
    """All registered suites, by name."""
    _discover()
    return dict(sorted(_SUITES.items()))


def get_suite(name: str) -> Suite:
    """The suite called ``name``; ValueError listing the known ones otherwise."""
    suites = list_suites()
    if name not in suites:
        raise ValueError(f"unknown benchmark suite {name!r}; known: {', '.join(suites) or 'none'}")
    return suites[name]
