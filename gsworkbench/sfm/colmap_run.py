"""Running pycolmap's long calls so that Ctrl-C stops them cleanly, with a tick for progress bars.

pycolmap's extraction, matching and mapping run in C++ for seconds to minutes. Python delivers a
signal only between bytecodes of the main thread, so a Ctrl-C during such a call would wait for its
end. :func:`cancellable` runs the call in a worker thread instead, while the main thread waits in
short slices: the first Ctrl-C cancels the call through pycolmap's ``CancellationToken`` (COLMAP stops
at its next check and the database keeps what was written), and :class:`Cancelled` is raised once the
call has returned.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from gsworkbench.core.interrupt import deferred_interrupt

POLL_S = 0.25


@contextlib.contextmanager
def colmap_log_level(level: int) -> Iterator[None]:
    """COLMAP's log (glog) at ``level`` (0 info, 1 warnings, 2 errors) while the block runs."""
    import pycolmap

    before, pycolmap.logging.minloglevel = pycolmap.logging.minloglevel, level
    try:
        yield
    finally:
        pycolmap.logging.minloglevel = before


class Cancelled(KeyboardInterrupt):
    """A pycolmap call was cancelled by Ctrl-C; what it wrote to its database is kept."""


def cancellable(
    call: Callable[..., Any], *args: Any, on_tick: Callable[[], object] | None = None, **kwargs: Any
) -> Any:
    """``call(*args, cancellation_token=token, **kwargs)`` in a worker thread; ``on_tick`` runs in
    this thread every :data:`POLL_S` seconds while it works (a progress bar's refresh). Raises
    :class:`Cancelled` after a Ctrl-C, and re-raises what the call raised."""
    import pycolmap

    token = pycolmap.CancellationToken()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = call(*args, cancellation_token=token, **kwargs)
        except BaseException as e:  # handed to the main thread
            box["error"] = e

    worker = threading.Thread(target=work, name=f"pycolmap-{getattr(call, '__name__', 'call')}", daemon=True)
    with deferred_interrupt(token.cancel) as interrupted:
        worker.start()
        while worker.is_alive():
            worker.join(POLL_S)
            if on_tick is not None:
                on_tick()
    if interrupted():
        raise Cancelled(f"{getattr(call, '__name__', 'pycolmap call')} cancelled")
    if "error" in box:
        raise box["error"]
    return box.get("value")
