"""A learnable 3D Gaussian field: evaluation backends, the module, targets and the trainer.

Backends of :func:`evaluate` (all differentiable, all agreeing to float32 rounding):
- ``loop``: a Python loop over Gaussians with one solve each (the baseline users come from);
- ``vectorized``: one batched solve over an expanded [B,N,3,3];
- ``torch``: precomputed inverse factors, chunked over points (bounded memory);
- ``numba``: fused parallel numba loops over the pairs (CPU), the peer the ext kernel is measured against;
- ``ext``: the fused C++/CUDA kernel with an analytic backward, O(B+N) memory.
"""

from gsworkbench.core.limits import MemoryBudgetError
from gsworkbench.field.api import BACKENDS, COVARIANCES, evaluate
from gsworkbench.field.module import GaussianField
from gsworkbench.field.targets import GaussianMixtureTarget, GridTarget, ShellTarget, TorusTarget, make_target
from gsworkbench.field.trainer import (
    FieldTrainConfig,
    FieldTrainStep,
    TrainResult,
    load_checkpoint,
    save_checkpoint,
    train_field,
)

__all__ = [
    "BACKENDS",
    "COVARIANCES",
    "FieldTrainStep",
    "GaussianField",
    "GaussianMixtureTarget",
    "GridTarget",
    "MemoryBudgetError",
    "ShellTarget",
    "TorusTarget",
    "FieldTrainConfig",
    "TrainResult",
    "evaluate",
    "load_checkpoint",
    "make_target",
    "save_checkpoint",
    "train_field",
]
