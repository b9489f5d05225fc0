"""The machine's roofline ceilings: peak float32 FMA throughput and memory bandwidth, measured by the
extension's own build (``gsworkbench::ceiling_fma`` and ``gsworkbench::ceiling_triad``,
``csrc/cpu/ceilings.cpp``), so they are the ceilings the kernels run against.

- ``peak_gflops``: every thread runs ``fma_accumulators`` independent chains of ``x = x * a + b`` in
  ``fma_lanes``-wide float32 registers (the widest SIMD the kernels use: AVX-512 or AVX2+FMA). Flops per
  call: 2 x lanes x accumulators x iterations x threads.
- ``bandwidth_gbs``: STREAM's triad ``a[i] = b[i] + s * c[i]`` over three float32 buffers of
  ``TRIAD_BYTES`` each (far above any last-level cache), OpenMP static schedule. Bytes are counted as
  STREAM counts them, 3 x 4 per element; with write-allocate caches the hardware moves 4 x 4 (the
  destination's lines are read before they are written), so the true traffic is a third higher.

Each is the best of ``repeats`` timings, each sized to about ``repeat_seconds`` (the work per timing is
scaled from a first short call). :func:`measure_ceilings` caches its result per process and thread count;
:func:`run_ceilings` is what a benchmark run records in its ``metadata.json`` (``GSW_CEILINGS=0`` skips
the measurement, and the metadata says so).
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from gsworkbench import _ext

TRIAD_BYTES = 64 << 20  # per buffer: three of them, 192 MiB in all
FMA_A, FMA_B = 0.999, 0.001  # x -> x a + b: stays finite (x tends to b / (1 - a)) for any iteration count
REPEATS = 5
REPEAT_SECONDS = 0.15

if _ext.has_kernel("ceiling_fma", "cpu") and _ext.has_kernel("ceiling_triad", "cpu"):  # absent from older builds

    @torch.library.register_fake("gsworkbench::ceiling_fma")
    def _(start: torch.Tensor, a: float, b: float, iterations: int) -> torch.Tensor:
        return torch.empty_like(start)

    @torch.library.register_fake("gsworkbench::ceiling_triad")
    def _(out: torch.Tensor, b: torch.Tensor, c: torch.Tensor, s: float) -> None:
        return None


@dataclass(frozen=True)
class MachineCeilings:
    """The two roofline ceilings at ``threads`` threads: ``peak_gflops`` (float32 FMA, GFLOP/s) and
    ``bandwidth_gbs`` (STREAM triad, GB/s of 1e9 bytes, STREAM's count); ``simd`` names the instruction
    set of the FMA loop and ``lanes`` its float32 width; ``how``: how they were measured."""

    peak_gflops: float
    bandwidth_gbs: float
    threads: int
    simd: str
    lanes: int
    how: str

    @property
    def ridge_intensity(self) -> float:
        """flop/byte where the two roofs meet: below it a kernel is bandwidth-bound."""
        return self.peak_gflops / self.bandwidth_gbs

    def attainable_gflops(self, intensity: float) -> float:
        """The roof at ``intensity`` flop/byte: min(peak, intensity x bandwidth), GFLOP/s."""
        return min(self.peak_gflops, intensity * self.bandwidth_gbs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MachineCeilings | None:
        """The ceilings recorded in a run's metadata; None when they were skipped or are absent."""
        try:
            return cls(float(d["peak_gflops"]), float(d["bandwidth_gbs"]), int(d["threads"]), str(d["simd"]),
                       int(d["lanes"]), str(d.get("how", "")))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            return None


def fma_shape() -> tuple[int, int]:
    """(accumulators, lanes) of this build's FMA loop."""
    _ext.require_ext()
    import gsworkbench._C as C

    return int(C.fma_accumulators), int(C.fma_lanes)


def fma_chains(start: torch.Tensor, a: float, b: float, iterations: int) -> torch.Tensor:
    """The extension's FMA loop: each of ``start``'s lanes ([threads, accumulators, lanes] float32, row t
    on thread t) after ``iterations`` steps of ``x = x * a + b``."""
    _ext.require_kernel("ceiling_fma", start.device.type)
    return torch.ops.gsworkbench.ceiling_fma(start, a, b, iterations)


def fma_chains_reference(start: torch.Tensor, a: float, b: float, iterations: int) -> torch.Tensor:
    """Plain torch reference of :func:`fma_chains`, in ``start``'s dtype (float64 for the tests)."""
    x = start.clone()
    for _ in range(iterations):
        x = x * a + b
    return x


def triad(out: torch.Tensor, b: torch.Tensor, c: torch.Tensor, s: float) -> torch.Tensor:
    """The extension's STREAM triad ``out[i] = b[i] + s * c[i]`` (1-D float32 buffers of one length), in
    place; returns ``out``."""
    _ext.require_kernel("ceiling_triad", out.device.type)
    torch.ops.gsworkbench.ceiling_triad(out, b, c, s)
    return out


def triad_reference(b: torch.Tensor, c: torch.Tensor, s: float) -> torch.Tensor:
    """Plain torch reference of :func:`triad`."""
    return b + s * c


def ceilings_unavailable() -> str | None:
    """Why the ceilings cannot be measured here (None when they can)."""
    if not _ext.has_ext():
        return "the gsworkbench._C extension is not built"
    if not (_ext.has_kernel("ceiling_fma", "cpu") and _ext.has_kernel("ceiling_triad", "cpu")):
        return "this build of gsworkbench._C has no ceiling ops (rebuild it)"
    return None


def _best_seconds(call: Any, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best


def _measure_fma(threads: int, repeats: int, repeat_seconds: float) -> float:
    acc, lanes = fma_shape()
    start = torch.rand(threads, acc, lanes, generator=torch.Generator().manual_seed(0))
    probe = 200_000
    one = max(_best_seconds(lambda: fma_chains(start, FMA_A, FMA_B, probe), 2), 1e-6)
    iterations = max(probe, int(probe * repeat_seconds / one))
    best = _best_seconds(lambda: fma_chains(start, FMA_A, FMA_B, iterations), repeats)
    return 2 * lanes * acc * iterations * threads / best / 1e9


def _measure_triad(repeats: int, repeat_seconds: float, buffer_bytes: int) -> float:
    n = max(buffer_bytes // 4, 1)
    a, b, c = torch.empty(n), torch.full((n,), 1.0), torch.full((n,), 2.0)  # pages touched by torch's threads
    a.fill_(0.0)
    one = max(_best_seconds(lambda: triad(a, b, c, 3.0), 2), 1e-6)
    passes = max(1, int(repeat_seconds / one))

    def run() -> None:
        for _ in range(passes):
            triad(a, b, c, 3.0)

    best = _best_seconds(run, repeats)
    return 3 * 4 * n * passes / best / 1e9


@functools.lru_cache(maxsize=8)
def measure_ceilings(
    threads: int, repeats: int = REPEATS, repeat_seconds: float = REPEAT_SECONDS, triad_bytes: int = TRIAD_BYTES
) -> MachineCeilings | None:
    """Both ceilings at ``threads`` threads (best of ``repeats`` timings of about ``repeat_seconds`` each;
    triad buffers of ``triad_bytes`` each); None when they cannot be measured here
    (:func:`ceilings_unavailable` says why). Cached per process and arguments."""
    if threads < 1:
        raise ValueError(f"measure_ceilings: threads must be >= 1, got {threads}")
    if ceilings_unavailable() is not None:
        return None
    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        peak = _measure_fma(threads, repeats, repeat_seconds)
        bandwidth = _measure_triad(repeats, repeat_seconds, triad_bytes)
    finally:
        torch.set_num_threads(prev)
    acc, lanes = fma_shape()
    import gsworkbench._C as C

    how = (f"best of {repeats} timings of ~{repeat_seconds:g} s each; FMA: {acc} chains of {lanes} float32 lanes "
           f"per thread; triad: 3 buffers of {triad_bytes >> 20} MiB, STREAM's 12 bytes per element")  # fmt: skip
    return MachineCeilings(peak, bandwidth, threads, str(C.fma_isa), lanes, how)


def highest_ceilings(found: list[MachineCeilings]) -> MachineCeilings:
    """One set of ceilings from several measurements of one machine: the highest peak and bandwidth. On
    a shared machine a measurement that lands in a slow minute reads low; the machine's roof is the
    most it was seen to do."""
    if not found:
        raise ValueError("highest_ceilings: no measurements")
    first = found[0]
    return replace(first, peak_gflops=max(c.peak_gflops for c in found),
                               bandwidth_gbs=max(c.bandwidth_gbs for c in found),
                               how=f"{first.how}; the highest of {len(found)} measurements")  # fmt: skip


def ceilings_enabled() -> bool:
    """False when ``GSW_CEILINGS=0``: benchmark runs then skip the measurement."""
    return os.environ.get("GSW_CEILINGS", "1").strip() not in ("0", "false", "no", "off")


def run_ceilings(threads: int) -> MachineCeilings | None:
    """The ceilings a benchmark run at ``threads`` threads uses (None when skipped or unavailable)."""
    return measure_ceilings(threads) if ceilings_enabled() else None


def ceilings_metadata(threads: int) -> dict[str, Any]:
    """The ``ceilings`` entry of a benchmark run's ``metadata.json``: the measured ceilings, or
    ``{"skipped": reason}``."""
    if not ceilings_enabled():
        return {"skipped": "GSW_CEILINGS=0"}
    why = ceilings_unavailable()
    if why is not None:
        return {"skipped": why}
    found = measure_ceilings(threads)
    return found.to_dict() if found is not None else {"skipped": "not measured"}
