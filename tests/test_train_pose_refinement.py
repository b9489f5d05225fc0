"""Camera refinement (gsworkbench.train.pose_refinement): the 6D rotation form against a float64
Gram-Schmidt reference, gradcheck of the corrected viewmats, test-time alignment that finds a known
pose error, and training that moves wrong training poses back towards the truth."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import ext_built
from hypothesis import given, settings
from hypothesis import strategies as st

from gsworkbench.train import TrainConfig, Trainer, preset
from gsworkbench.train.pose_refinement import (
    CameraRefinement,
    align_pose,
    corrected_viewmats,
    correction_matrices,
    intrinsic_matrices,
    radial_warp,
    rotation_from_6d,
)


def _reference_rotation(d6: np.ndarray) -> np.ndarray:
    """Gram-Schmidt on the identity's two first columns plus the deviations, one rotation at a time."""
    a1, a2 = np.array([1.0, 0, 0]) + d6[:3], np.array([0, 1.0, 0]) + d6[3:]
    b1 = a1 / np.linalg.norm(a1)
    u = a2 - b1.dot(a2) * b1
    b2 = u / np.linalg.norm(u)
    return np.column_stack([b1, b2, np.cross(b1, b2)])


def _angle_deg(R: torch.Tensor) -> torch.Tensor:
    """The rotation angle [...] in degrees of rotations [...,3,3]."""
    cos = ((R.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1)
    return torch.rad2deg(torch.arccos(cos))


def test_zero_corrections_are_the_identity() -> None:
    viewmats = torch.eye(4).repeat(3, 1, 1)
    viewmats[:, :3, 3] = torch.randn(3, 3)
    assert torch.equal(corrected_viewmats(viewmats, torch.zeros(3, 9), 2.0), viewmats)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.01, 0.8), st.floats(0.1, 10.0))
def test_corrections_match_a_float64_reference(seed: int, spread: float, scale: float) -> None:
    """Rotations orthonormal with determinant 1 and equal to a numpy Gram-Schmidt (relative error), the
    translation in units of ``scale``, for float32 and float64 corrections."""
    g = torch.Generator().manual_seed(seed)
    params = torch.randn(5, 9, generator=g, dtype=torch.float64) * spread
    want = np.stack([_reference_rotation(p[3:]) for p in params.numpy()])
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        D = correction_matrices(params.to(dtype), scale).double()
        R = D[:, :3, :3]
        assert float((R - torch.from_numpy(want)).norm() / math.sqrt(5 * 3)) < tol
        assert torch.allclose(R.transpose(1, 2) @ R, torch.eye(3, dtype=torch.float64).expand(5, 3, 3), atol=10 * tol)
        assert torch.allclose(torch.linalg.det(R), torch.ones(5, dtype=torch.float64), atol=10 * tol)
        assert torch.allclose(D[:, :3, 3], params[:, :3] * scale, rtol=tol)
        assert torch.equal(D[:, 3], torch.tensor([0, 0, 0, 1.0], dtype=torch.float64).expand(5, 4))


def test_corrected_viewmats_gradcheck() -> None:
    g = torch.Generator().manual_seed(1)
    viewmats = torch.linalg.qr(torch.randn(2, 4, 4, generator=g, dtype=torch.float64))[0]
    params = (0.1 * torch.randn(2, 9, generator=g, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda p: corrected_viewmats(viewmats, p, 1.7), (params,))
    lens = (0.05 * torch.randn(2, 3, generator=g, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda p, q: corrected_viewmats(viewmats, p, 1.7, q), (params, lens))
    assert torch.autograd.gradcheck(rotation_from_6d, (params[:, 3:].detach().clone().requires_grad_(),))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_an_intrinsic_correction_is_the_pixel_of_the_corrected_lens(seed: int) -> None:
    """A point seen through the camera-side intrinsic map lands where the corrected lens (focal
    e^s f, principal point c + p f) puts it (float64)."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randn(3, generator=g, dtype=torch.float64) * 0.05
    f, cx, cy = 200.0, 130.0, 95.0
    x = torch.randn(3, generator=g, dtype=torch.float64) + torch.tensor([0, 0, 5.0], dtype=torch.float64)
    xc = (intrinsic_matrices(lens) @ torch.cat([x, x.new_ones(1)]))[:3]
    got = torch.stack([f * xc[0] / xc[2] + cx, f * xc[1] / xc[2] + cy])
    F = f * lens[0].exp()
    want = torch.stack([F * x[0] / x[2] + cx + lens[1] * f, F * x[1] / x[2] + cy + lens[2] * f])
    assert float((got - want).norm() / want.norm()) < 1e-12


def _reference_warp(img: np.ndarray, k1: float, K: np.ndarray) -> np.ndarray:
    """Pixel by pixel: the bilinear value at c + (p - c)(1 + k1 r^2), coordinates clamped to the centres."""
    H, W, _ = img.shape
    out = np.zeros_like(img)
    for i in range(H):
        for j in range(W):
            dx, dy = j + 0.5 - K[0, 2], i + 0.5 - K[1, 2]
            g = 1 + k1 * ((dx / K[0, 0]) ** 2 + (dy / K[1, 1]) ** 2)
            x = min(max(K[0, 2] + dx * g - 0.5, 0.0), W - 1.0)
            y = min(max(K[1, 2] + dy * g - 0.5, 0.0), H - 1.0)
            x0, y0 = min(int(x), W - 2), min(int(y), H - 2)
            fx, fy = x - x0, y - y0
            out[i, j] = ((1 - fy) * ((1 - fx) * img[y0, x0] + fx * img[y0, x0 + 1])
                         + fy * ((1 - fx) * img[y0 + 1, x0] + fx * img[y0 + 1, x0 + 1]))  # fmt: skip
    return out


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(-0.3, 0.3))
def test_radial_warp_matches_a_pixel_loop(seed: int, k1: float) -> None:
    g = torch.Generator().manual_seed(seed)
    img = torch.rand(1, 9, 13, 2, generator=g, dtype=torch.float64)
    K = torch.tensor([[[11.0, 0, 6.1], [0, 10.0, 4.7], [0, 0, 1]]], dtype=torch.float64)
    want = _reference_warp(img[0].numpy(), k1, K[0].numpy())
    got = radial_warp(img, torch.tensor([k1], dtype=torch.float64), K)[0].numpy()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-12
    assert torch.allclose(radial_warp(img, torch.zeros(1, dtype=torch.float64), K), img, atol=1e-12)
    if abs(k1) > 1e-3:  # at k1 = 0 every sample sits on a pixel centre, where bilinear weights have a kink
        k = torch.tensor([k1], dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda a, b: radial_warp(a, b, K), (img.clone().requires_grad_(), k))


def _small_scene(tmp_path):  # noqa: ANN202
    from gsworkbench.synthetic import builtin_scene

    return builtin_scene("object", width=48, height=48, n_train=12, n_test=2, cache_dir=tmp_path / "cache")


def _turned(viewmats: torch.Tensor, degrees: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """``viewmats`` [C,4,4] each turned about a random axis through its camera by ``degrees`` [C]."""
    axes = torch.nn.functional.normalize(torch.randn(len(viewmats), 3, generator=g), dim=1)
    K = torch.zeros(len(viewmats), 3, 3)
    K[:, 0, 1], K[:, 0, 2], K[:, 1, 2] = -axes[:, 2], axes[:, 1], -axes[:, 0]
    K = K - K.transpose(1, 2)
    D = torch.eye(4).repeat(len(viewmats), 1, 1)
    D[:, :3, :3] = torch.linalg.matrix_exp(K * torch.deg2rad(degrees)[:, None, None])
    return D @ viewmats


def test_alignment_finds_a_known_pose_error(tmp_path) -> None:
    """A trained small scene, one held-out camera turned by 3 degrees: test-time alignment brings its
    render within a fraction of that of the photo, and scores the photo higher than before."""
    scene = _small_scene(tmp_path)
    cfg = preset("smoke", iterations=200, seed=1, eval_pose_steps=60, lr_eval_pose=3e-3,
                 backend="ext" if ext_built() else "torch")  # fmt: skip
    trainer = Trainer(scene, cfg)
    trainer.run()
    view = int(scene.test_ids[0])
    truth = scene.viewmats[view].clone()
    before, _ = trainer.evaluate([view])
    trainer.scene.viewmats[view] = _turned(truth[None], torch.tensor([3.0]), torch.Generator().manual_seed(0))[0]
    unaligned = replace(cfg, eval_pose_steps=0)
    trainer.cfg = unaligned
    wrong, _ = trainer.evaluate([view])
    trainer.cfg = cfg
    photo = trainer.scene.images[view]
    correction, _ = align_pose(lambda p, _: trainer.render([view], pose=(p[None], None))[0][0], photo, 60, 3e-3)
    fixed = corrected_viewmats(trainer.scene.viewmats[view][None], correction[None], trainer.scene_scale)[0]
    left = float(_angle_deg(fixed[:3, :3] @ truth[:3, :3].T))
    assert left < 1.0, left  # of the 3 degrees
    aligned, _ = trainer.evaluate([view])
    assert float(aligned["psnr_db"][0]) > float(wrong["psnr_db"][0]) + 3.0, (before, wrong, aligned)


def test_alignment_leaves_what_training_learns_untouched(tmp_path) -> None:
    """Held-out alignment inside a run (eval_every) moves no splat, appearance or pose parameter and
    leaves them no gradient that the next step's optimisers would apply."""
    scene = _small_scene(tmp_path)
    cfg = preset("smoke", iterations=20, seed=1, eval_pose_steps=5, pose_opt=True, intrinsics_opt=True,
                 appearance="affine", backend="ext" if ext_built() else "torch")  # fmt: skip
    trainer = Trainer(scene, cfg)
    trainer.run()
    learned = [*trainer.model.params.values(), trainer.appearance.params, *trainer.poses.tensors]
    before = [t.detach().clone() for t in learned]
    trainer.evaluate()
    assert all(t.grad is None and t.requires_grad for t in learned)
    assert all(torch.equal(t.detach(), b) for t, b in zip(learned, before, strict=True))


def test_training_moves_wrong_poses_towards_the_truth(tmp_path) -> None:
    """Training views turned by 1.5 to 3 degrees each: with pose_opt their learned corrections take
    back most of it (relative to one another: the splats may settle in a frame turned as a whole),
    the held-out views' corrections stay at the identity, and a checkpoint resumes them."""
    scene = _small_scene(tmp_path)
    g = torch.Generator().manual_seed(3)
    truth = scene.viewmats.clone()
    train = scene.train_ids
    degrees = torch.zeros(len(truth))
    degrees[train] = 1.5 + 1.5 * torch.rand(len(train), generator=g)
    scene = replace(scene, viewmats=_turned(truth, degrees, g))
    cfg = preset("smoke", iterations=400, pose_opt=True, lr_pose=1e-3, seed=2,
                 backend="ext" if ext_built() else "torch")  # fmt: skip
    trainer = Trainer(scene, cfg)
    trainer.run()
    fixed = trainer.poses.apply(trainer.scene.viewmats[train], train).detach()

    def spread(vm: torch.Tensor) -> float:
        """Median angle between two cameras' errors on the world side (truth^T wrong): a turn of the
        whole frame is the same error for every camera, so it cancels."""
        err = truth[train][:, :3, :3].transpose(1, 2) @ vm[:, :3, :3]
        return float(torch.stack([_angle_deg(err @ e.T) for e in err]).median(1).values.median())

    assert spread(fixed) < 0.6 * spread(scene.viewmats[train]), (spread(fixed), spread(scene.viewmats[train]))
    assert torch.count_nonzero(trainer.poses.params[scene.test_ids]) == 0
    path = trainer.save_checkpoint(tmp_path / "ck.pt")
    assert torch.equal(Trainer.from_checkpoint(path, scene).poses.params, trainer.poses.params.detach())


def test_refinement_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="lr_pose"):
        TrainConfig(lr_pose=-1.0)
    with pytest.raises(ValueError, match="needs pose_opt"):
        TrainConfig(intrinsics_opt=True)
    with pytest.raises(ValueError, match="eval_pose_steps"):
        TrainConfig(eval_pose_steps=-3)
    assert CameraRefinement(4, 1e-3, 2.0).summary(torch.tensor([0, 2]))["pose_correction_deg_max"] == 0.0
