"""Headless Chromium for checking and timing the viewer: open a page, evaluate JavaScript in it,
read its canvas. WebGL runs on the CPU through SwiftShader, so no GPU or display is needed.

The browser is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON
messages ending in a NUL byte on file descriptors 3 and 4), so there is no port and no client
library. The browser reaches no network (background networking and component updates are off and
pages are local files).
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
    "--disable-background-networking", "--disable-component-update", "--no-first-run",
    "--disable-gpu-sandbox", "--hide-scrollbars", "--force-device-scale-factor=1",
)  # fmt: skip


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable: ``$GSW_CHROMIUM``, else the first on PATH; None if none."""
    env = os.environ.get("GSW_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    """The browser failed, or JavaScript in the page threw."""


class HeadlessChromium:
    """A headless Chromium with one page of ``width`` x ``height`` CSS pixels (device pixel ratio 1).

    Use as a context manager: ``with HeadlessChromium(800, 600) as b: b.open(path); b.evaluate("1+1")``.
    """

    def __init__(self, width: int, height: int, executable: str | None = None, timeout_s: float = 120.0) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("no Chromium found (install Debian's chromium, or set GSW_CHROMIUM)")
        self.timeout_s = timeout_s
        self._profile = tempfile.TemporaryDirectory(prefix="gsw-chromium-")
        r, self._to_browser = os.pipe()
        self._from_browser, w = os.pipe()
        # the browser reads commands on fd 3 and writes replies on fd 4. The pipe ends are moved above
        # 10 (close-on-exec) so that placing them at 3 and 4 in the child never overwrites one of them;
        # close_fds=False keeps those two, the only inheritable descriptors beyond stdio.
        r_hi, w_hi = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (r, w))
        os.close(r)
        os.close(w)

        def place_fds() -> None:
            os.dup2(r_hi, 3)
            os.dup2(w_hi, 4)

        self._proc = subprocess.Popen(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=place_fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(r_hi)
        os.close(w_hi)
        self._buffer = b""
        self._next_id = 0
        self.console: list[str] = []  # the page's console messages and the browser's log entries
        targets = self._call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self._session = self._call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        self.resize(width, height)
        self._call("Runtime.enable", session=True)
        self._call("Page.enable", session=True)
        self._call("Log.enable", session=True)  # the browser's own messages: WebGL errors, failed loads

    # ---- protocol ------------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise BrowserError("the browser did not answer in time")
            if self._proc.poll() is not None:
                raise BrowserError(f"the browser exited (status {self._proc.returncode})")
            # wait at most a second at a time, so that the deadline holds when the browser sends nothing
            if not select.select([self._from_browser], [], [], min(1.0, max(deadline - time.monotonic(), 0.0)))[0]:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("method") == "Runtime.consoleAPICalled":
                args = reply["params"].get("args", [])
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args))
            elif reply.get("method") == "Log.entryAdded":
                self.console.append(str(reply["params"]["entry"].get("text", "")))
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply["result"]

    @property
    def pid(self) -> int:
        """The browser's process id (its GPU, renderer and utility processes are its descendants)."""
        return self._proc.pid

    # ---- pages ---------------------------------------------------------------------------------

    def open(self, path: str | os.PathLike[str]) -> None:
        """Loads a local file in the page and waits for its load event."""
        self._call("Page.navigate", url=Path(path).resolve().as_uri(), session=True)
        self.evaluate("new Promise((r) => document.readyState === 'complete' ? r() : addEventListener('load', r))")

    def resize(self, width: int, height: int) -> None:
        """Makes the page ``width`` x ``height`` CSS pixels (device pixel ratio 1), as a resized window."""
        self._call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                   mobile=False, session=True)  # fmt: skip

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise; JSON values)."""
        result = self._call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True,
                            session=True)  # fmt: skip
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"JavaScript threw: {text}")
        return result["result"].get("value")

    def drag(self, start: tuple[float, float], end: tuple[float, float], steps: int = 20) -> None:
        """A left-button mouse drag from ``start`` to ``end`` (CSS pixels in the page) in ``steps``
        moves, as a user's: press, moves, release (pointer events in the page)."""
        (x0, y0), (x1, y1) = start, end
        self._mouse("mousePressed", x0, y0, buttons=1, clickCount=1)
        for i in range(1, steps + 1):
            t = i / steps
            self._mouse("mouseMoved", x0 + t * (x1 - x0), y0 + t * (y1 - y0), buttons=1)
        self._mouse("mouseReleased", x1, y1, buttons=0, clickCount=1)

    def key(self, code: str, down: bool) -> None:
        """A letter key (``code`` as the DOM names it, e.g. ``"KeyW"``) pressed (``down``) or released
        in the focused element, as a user's keyboard sends it."""
        letter = code.removeprefix("Key")
        if len(letter) != 1 or not letter.isalpha():
            raise ValueError(f"key takes a letter key's code such as 'KeyW', got {code!r}")
        self._call("Input.dispatchKeyEvent", type="keyDown" if down else "keyUp", code=code, key=letter.lower(),
                   windowsVirtualKeyCode=ord(letter.upper()), session=True)  # fmt: skip

    def _mouse(self, kind: str, x: float, y: float, **params: Any) -> None:
        self._call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", session=True, **params)

    def screenshot(self) -> np.ndarray:
        """The page as shown, [H,W,3] uint8 RGB. Chromium captures the next frame its compositor draws:
        a page that draws nothing more (the viewer, left alone) may give it none, and the call then ends
        with :class:`BrowserError` at ``timeout_s``; read a canvas with ``toDataURL`` instead."""
        from PIL import Image

        data = self._call("Page.captureScreenshot", format="png", session=True)["data"]
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._call("Browser.close")
            except BrowserError:
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
