"""Per-photo appearance (gsworkbench.train.appearance): the colour-corrected PSNR against a numpy
least-squares reference, the transforms' bookkeeping, and training that learns each photo's exposure."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import ext_built

from gsworkbench.train import Trainer, preset
from gsworkbench.train.appearance import PhotoAppearance, colour_corrected_psnr
from gsworkbench.train.losses import psnr


def test_colour_corrected_psnr_matches_a_numpy_least_squares_fit() -> None:
    g = torch.Generator().manual_seed(0)
    ref = torch.rand(20, 24, 3, generator=g, dtype=torch.float64) * 0.6 + 0.2
    A = torch.tensor([[1.3, 0.05, 0.0], [0.0, 0.9, 0.1], [0.02, 0.0, 1.1]], dtype=torch.float64)
    img = ((ref - 0.05) @ torch.linalg.inv(A).T).clamp(0, 1)  # the same picture at another exposure and balance
    assert colour_corrected_psnr(img, ref) > 60 > psnr(img, ref) + 30  # the fit undoes what the exposure did
    noisy = (img + 0.03 * torch.randn(img.shape, generator=g, dtype=torch.float64)).clamp(0, 1)
    x = np.c_[noisy.reshape(-1, 3).numpy(), np.ones(20 * 24)]
    fit = np.linalg.lstsq(x, ref.reshape(-1, 3).numpy(), rcond=None)[0]
    want = -10 * math.log10(float(((np.clip(x @ fit, 0, 1) - ref.reshape(-1, 3).numpy()) ** 2).mean()))
    assert colour_corrected_psnr(noisy, ref) == pytest.approx(want, rel=1e-9)


def test_the_transforms_start_at_the_identity_and_held_out_views_take_the_mean() -> None:
    app = PhotoAppearance(5, torch.tensor([0, 1, 3]), lr=1e-2)
    c = torch.rand(4, 4, 3)
    assert torch.equal(app.apply(c, 2), c) and torch.equal(app.apply(c, 0, held_out=True), c)
    with torch.no_grad():
        app.params[0, 0, 0], app.params[1, 0, 0], app.params[3, 0, 0], app.params[2, 0, 0] = 0.3, 0.6, 0.0, 9.0
    A, b = app.transform(4, held_out=True)  # the mean of the training views' (view 2 is held out)
    assert A[0, 0].item() == pytest.approx(1.3) and torch.equal(b, torch.zeros(3))
    state = app.state_dict()
    other = PhotoAppearance(5, torch.tensor([0, 1, 3]), lr=1e-2)
    other.load_state_dict(state)
    assert torch.equal(other.params, app.params)


def test_training_learns_each_photos_exposure(tmp_path) -> None:
    """Each photo of a small scene at its own exposure (x0.5 to x1): training with
    appearance="affine" learns transforms that follow the gains (rank correlation), leaves the
    held-out views' untouched, scores held-out views after a colour fit too, and resumes them."""
    from gsworkbench.synthetic import builtin_scene

    scene = builtin_scene("object", width=40, height=40, n_train=12, n_test=2, cache_dir=tmp_path / "cache")
    order = torch.randperm(len(scene.images), generator=torch.Generator().manual_seed(0))
    gains = torch.linspace(0.5, 1.0, len(scene.images))[order]  # darker only: nothing clips at white
    scene = replace(scene, images=(scene.images * gains[:, None, None, None]).clamp(0, 1))
    cfg = preset("smoke", iterations=240, appearance="affine", lr_appearance=2e-2, seed=2,
                 backend="ext" if ext_built() else "torch")  # fmt: skip
    trainer = Trainer(scene, cfg)
    trainer.run()
    learned = torch.stack([trainer.appearance.transform(v)[0].diagonal().mean() for v in scene.train_ids.tolist()])
    truth = gains[scene.train_ids]
    rank = lambda x: torch.argsort(torch.argsort(x)).double()  # noqa: E731
    corr = float(torch.corrcoef(torch.stack([rank(learned.detach()), rank(truth)]))[0, 1])
    assert corr > 0.8, (corr, learned, truth)
    assert torch.count_nonzero(trainer.appearance.params[scene.test_ids]) == 0
    table, _ = trainer.evaluate()
    assert (table["psnr_cc_db"] >= table["psnr_db"] - 1e-6).all()
    path = trainer.save_checkpoint(tmp_path / "ck.pt")
    assert torch.equal(Trainer.from_checkpoint(path, scene).appearance.params, trainer.appearance.params.detach())
