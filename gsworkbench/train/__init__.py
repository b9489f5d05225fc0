"""3DGS training from posed images: :func:`train`, :class:`Trainer`, :class:`TrainConfig` with its
strategy (:class:`DefaultStrategy`, :class:`MCMCStrategy`), and the presets.

>>> from gsworkbench.synthetic import builtin_scene
>>> from gsworkbench.train import preset, preset_scene, train
>>> result = train(builtin_scene(**preset_scene("smoke")), preset("smoke"))  # doctest: +SKIP
"""

from gsworkbench.train.config import TrainConfig
from gsworkbench.train.divergence import TrainingDiverged
from gsworkbench.train.interrupt import TrainingInterrupted
from gsworkbench.train.losses import l1, psnr, ssim
from gsworkbench.train.presets import PRESETS, Preset, preset, preset_scene
from gsworkbench.train.run import TrainResult, train
from gsworkbench.train.strategy import DefaultStrategy, MCMCStrategy
from gsworkbench.train.timers import STAGES, StageTimer
from gsworkbench.train.trainer import Trainer, load_checkpoint

__all__ = [
    "PRESETS",
    "Preset",
    "STAGES",
    "DefaultStrategy",
    "MCMCStrategy",
    "StageTimer",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingDiverged",
    "TrainingInterrupted",
    "l1",
    "load_checkpoint",
    "preset",
    "preset_scene",
    "psnr",
    "ssim",
    "train",
]
