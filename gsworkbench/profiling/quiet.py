"""Keeping the profilers' own log lines out of what a researcher reads.

torch.profiler's C++ side (kineto) writes lines such as ``USDT:2026-11-24 06:19:19 6908:6908
SyncActivityProfilerHandler.cpp:52] profiler_start`` straight to file descriptor 2, past Python's
``sys.stderr``; in Jupyter they show as a pink stderr block under the cell. :func:`filtered_stderr`
points descriptor 2 at a temporary file while a block runs, then writes back every line but the
ones to drop, so any other message (a warning, an error) still reaches stderr.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

# kineto's progress lines (its warnings and errors are kept):
# "USDT:<date> <time> <pid>:<tid> <File>.cpp:<line>] <message>", and "STAGE:..." in older versions
KINETO_LOG = re.compile(r"^(?:USDT|STAGE):\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \d+:\d+ \S+\.cpp:\d+\]")


def drop_lines(text: str, drop: re.Pattern[str] = KINETO_LOG) -> str:
    """``text`` without the lines that ``drop`` matches (line endings kept)."""
    return "".join(line for line in text.splitlines(keepends=True) if not drop.match(line))


@contextlib.contextmanager
def filtered_stderr(drop: re.Pattern[str] = KINETO_LOG) -> Iterator[None]:
    """Captures file descriptor 2 while the block runs; afterwards writes what was captured to
    ``sys.stderr``, less the lines ``drop`` matches. Does nothing when descriptor 2 is not open."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr descriptor to redirect
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        _flush()
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            _flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = drop_lines(tmp.read().decode("utf-8", errors="replace"), drop)
            if kept:
                sys.stderr.write(kept)
                _flush()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
