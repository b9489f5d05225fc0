"""Times one revision's benchmark cases on request (run by :mod:`gsworkbench.bench.revisions`).

This file is executed as a script (``python -c <this source> SUITE QUICK THREADS SUITES_MODULE``) inside
the revision's worktree, with that worktree first on ``PYTHONPATH``, so it imports *that revision's*
``gsworkbench``. It imports ``SUITES_MODULE`` (which registers the suites) where the revision has it; a
revision from before that module's time finds its suites in ``get_suite`` itself. It relies only on the
oldest stable interface, ``registry.get_suite(name).cases(quick)`` returning cases with ``name``,
``params``, ``setup`` and ``skip`` (``setup()`` returning the callable, or an object holding it as
``fn``, as ``registry.Prepared`` does, with its extra columns from ``extra_columns()``, such as the work
counts of the roofline columns). It holds no timing loop: the driver runs the runner's
(``runner.time_blocks``, the one every suite is timed with) and asks this worker for its steps, an
untimed call or the seconds per call of a block, timed by ``torch.utils.benchmark.Timer`` as the runner
times in-process; so both revisions are measured by the same code.
It answers one JSON line per request on the original stdout; anything the suite prints goes to stderr.

Requests: {"op": "list"} | {"op": "setup", "case": NAME} | {"op": "call"} | {"op": "time", "number": K}
| {"op": "extras"} (the set-up case's extra columns, after its timing) | {"op": "quit"}.
"""

import importlib
import json
import os
import sys
import traceback
from typing import Any


def extension_file() -> str | None:
    """Where ``gsworkbench._C`` was loaded from (None when it is not importable)."""
    mod = sys.modules.get("gsworkbench._C")
    if mod is None:
        try:
            mod = importlib.import_module("gsworkbench._C")
        except ImportError:
            return None
    return getattr(mod, "__file__", None)


def plain(value: Any) -> Any:
    """An extra column's value as JSON carries it: numbers as float or int, anything else as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def main() -> None:
    suite_name, quick, threads, suites_module = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # suite output (prints, progress) goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    import torch
    from torch.utils import benchmark

    torch.set_num_threads(threads)
    try:
        importlib.import_module(suites_module)  # registers the revision's suites
    except ModuleNotFoundError as err:
        missing = err.name or ""
        if suites_module != missing and not suites_module.startswith(missing + "."):
            raise  # a suite's own import failed, not the module's absence
    from gsworkbench.bench.registry import get_suite

    cases = {c.name: c for c in get_suite(suite_name).cases(quick)}
    timer = fn = extras = None
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "list":
                reply = {"cases": [{"name": c.name, "params": repr(c.params), "skip": c.skip} for c in cases.values()],
                         "extension": extension_file()}  # fmt: skip
            elif req["op"] == "setup":
                timer = fn = extras = None
                result = cases[req["case"]].setup()
                fn = getattr(result, "fn", result)
                extras = getattr(result, "extra_columns", None)  # a Prepared's; a bare callable has none
                timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
                reply = {}
            elif req["op"] == "extras":  # after the timing: some extras summarise the timed calls
                reply = {"extras": {k: plain(v) for k, v in (extras() if extras else {}).items()}}
            elif req["op"] == "call":
                fn()
                reply = {}
            elif req["op"] == "time":
                reply = {"per_call": timer.timeit(int(req["number"])).median}
            elif req["op"] == "quit":
                return
            else:
                reply = {"error": f"unknown request {req['op']!r}"}
        except Exception as err:  # reported to the driver, which names the case and revision
            traceback.print_exc()
            reply = {"error": f"{type(err).__name__}: {err}"}
        proto.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
