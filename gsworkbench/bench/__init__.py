"""The benchmark core: a registry of suites, a runner over ``torch.utils.benchmark`` and a store.

A suite registers itself with :func:`~gsworkbench.bench.registry.register_suite`; the built-in suites
are :mod:`gsworkbench.studies.suites`.
"""

from gsworkbench.bench.registry import Case, Prepared, Suite, get_suite, list_suites, register_suite
from gsworkbench.bench.runner import run_cases, run_suite, timing_stats
from gsworkbench.bench.store import save_run

__all__ = ["Case", "Prepared", "Suite", "get_suite", "list_suites", "register_suite", "run_cases", "run_suite",
           "save_run", "timing_stats"]  # fmt: skip
