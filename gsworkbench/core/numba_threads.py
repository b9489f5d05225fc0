"""The numba peers' thread count (the ``numba`` backends of the field and the transform)."""

from __future__ import annotations


def match_torch_threads() -> None:
    """Sets numba's thread count to torch's (as the ext backends and the benchmark runner use), within
    numba's pool. Needs the numba package."""
    import numba
    import torch

    numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))
