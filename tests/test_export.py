""".splat and .spz writers, read back by readers written here from each format's published layout
(not by the writers' code), within each format's stated quantisation; and the export command.
The browser's reader (Spark) loads both in tests/test_viewer_browser.py."""

from __future__ import annotations

import gzip
import math
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from gsworkbench.cli.main import main
from gsworkbench.core import gaussians
from gsworkbench.core.splats import SplatSet, synthetic_splats
from gsworkbench.io import read_ply, write_ply, write_splat, write_spz
from gsworkbench.io.spz import encode_spz


def _scene(n: int, degree: int, seed: int) -> SplatSet:
    """Synthetic splats kept inside both formats' ranges (colours in [0, 1], SH rest in [-1, 1))."""
    s = synthetic_splats(n, degree, seed=seed, extent=3.0)
    s.sh_rest.clamp_(-0.99, 0.98)
    s.quats[0] = torch.tensor([1.0, 0.0, 0.0, 0.0])  # identity: a component of exactly +1
    s.quats[1] = torch.tensor([0.0, 0.0, 0.0, -2.0])  # unnormalised, negative largest component
    return s


# ---- .splat: antimatter15's layout ------------------------------------------------------------------


def read_splat_layout(data: bytes) -> dict[str, np.ndarray]:
    """The 32-byte records: position f32x3, scale f32x3, RGBA u8x4, rotation u8x4 (wxyz, (q+1)*128)."""
    assert len(data) % 32 == 0
    raw = np.frombuffer(data, dtype=np.uint8).reshape(-1, 32)
    f = raw[:, :24].copy().view("<f4")
    return {"means": f[:, :3], "scales": f[:, 3:6], "rgba": raw[:, 24:28] / 255.0,
            "quats": (raw[:, 28:32].astype(np.float64) - 128.0) / 128.0}  # fmt: skip


def test_splat_round_trip_within_quantisation(tmp_path: Path) -> None:
    s = _scene(300, 3, seed=1)
    path = write_splat(tmp_path / "a.splat", s)
    assert path.stat().st_size == 32 * len(s)
    back = read_splat_layout(path.read_bytes())
    assert np.array_equal(back["means"], s.means.numpy())
    np.testing.assert_allclose(back["scales"], torch.exp(s.log_scales.double()).numpy(), rtol=1e-6)
    rgb = (0.5 + gaussians.SH_C0 * s.sh_dc.double()).clamp(0, 1).numpy()
    assert np.abs(back["rgba"][:, :3] - rgb).max() <= 0.5 / 255 + 1e-9
    assert np.abs(back["rgba"][:, 3] - torch.sigmoid(s.opacity_logits.double()).numpy()).max() <= 0.5 / 255 + 1e-9
    q = gaussians.quat_normalize(s.quats.double()).numpy()
    err = np.abs(back["quats"] - q)
    assert err.max() <= 1 / 128 + 1e-9 and err[np.abs(q) < 127 / 128].max() <= 0.5 / 128 + 1e-9
    assert back["quats"][0].tolist() == [127 / 128, 0, 0, 0] and back["quats"][1].tolist() == [0, 0, 0, -1]


# ---- .spz: Niantic's published layout (version 3) ---------------------------------------------------


def read_spz_layout(data: bytes) -> dict[str, np.ndarray | int]:
    """Decodes a gzip .spz v3: header, then positions (24-bit fixed point), alphas, colours, scales,
    rotations (smallest three: 2-bit index of the largest, three 10-bit sign + 9-bit magnitudes, the
    last component in the lowest bits), SH (byte - 128) / 128. Axes as stored (RUB)."""
    raw = gzip.decompress(data)
    magic, version, n, degree, frac, flags, reserved = struct.unpack_from("<IIIBBBB", raw, 0)
    assert (magic, version, reserved) == (0x5053474E, 3, 0), (hex(magic), version, reserved)
    k = (degree + 1) ** 2 - 1
    body = np.frombuffer(raw, dtype=np.uint8, offset=16)
    assert body.size == n * (9 + 1 + 3 + 3 + 4 + 3 * k)
    sizes = {"positions": 9, "alphas": 1, "colors": 3, "scales": 3, "rotations": 4, "sh": 3 * k}
    sec, at = {}, 0
    for name, size in sizes.items():
        sec[name] = body[at : at + n * size].reshape(n, size)
        at += n * size
    p = sec["positions"].reshape(n, 3, 3).astype(np.int32)
    fixed = p[..., 0] | (p[..., 1] << 8) | (p[..., 2] << 16)
    fixed = np.where(fixed & 0x800000, fixed - (1 << 24), fixed)
    packed = sec["rotations"].astype(np.uint32) @ np.array([1, 1 << 8, 1 << 16, 1 << 24], dtype=np.uint32)
    largest = packed >> 30
    quats = np.zeros((n, 4))  # xyzw, as the format stores them
    rest = packed.copy()
    for i in range(3, -1, -1):
        here = largest != i
        mag = (rest & 511) / 511 * math.sqrt(0.5)
        neg = (rest >> 9) & 1
        quats[here, i] = np.where(neg[here] == 1, -mag[here], mag[here])
        rest = np.where(here, rest >> 10, rest)
    quats[np.arange(n), largest] = np.sqrt(np.clip(1 - (quats**2).sum(1), 0, None))
    return {
        "degree": degree, "fractional_bits": frac, "flags": flags,
        "means": fixed / float(1 << frac),
        "opacities": sec["alphas"][:, 0] / 255.0,
        "sh_dc": (sec["colors"] / 255.0 - 0.5) / 0.15,
        "log_scales": sec["scales"] / 16.0 - 10.0,
        "quats_wxyz": np.roll(quats, 1, axis=1),
        "sh_rest": ((sec["sh"].astype(np.float64) - 128.0) / 128.0).reshape(n, k, 3),
    }  # fmt: skip


@pytest.mark.parametrize("degree", [0, 1, 3])
def test_spz_round_trip_within_quantisation(tmp_path: Path, degree: int) -> None:
    s = _scene(400, degree, seed=degree)
    path = write_spz(tmp_path / "a.spz", s)
    back = read_spz_layout(path.read_bytes())
    assert back["degree"] == degree and back["fractional_bits"] == 12
    flip = np.array([1.0, -1.0, -1.0])  # the workbench's axes are stored as RUB: a half turn about x
    means = back["means"] * flip
    assert np.abs(means - s.means.double().numpy()).max() <= 2.0**-13 + 1e-7
    assert np.abs(back["opacities"] - torch.sigmoid(s.opacity_logits.double()).numpy()).max() <= 0.5 / 255 + 1e-9
    assert np.abs(back["sh_dc"] - s.sh_dc.double().numpy()).max() <= 0.5 / (0.15 * 255) + 1e-9
    assert np.abs(back["log_scales"] - s.log_scales.double().numpy()).max() <= 1 / 32 + 1e-9
    # the stored rotation is the half turn about x after the splat's own: (0, 1, 0, 0) * q = (-x, w, -z, y)
    w, x, y, z = gaussians.quat_normalize(s.quats.double()).numpy().T
    q = np.stack([-x, w, -z, y], 1)
    sign = np.sign((back["quats_wxyz"] * q).sum(1, keepdims=True))  # q and -q are one rotation
    assert np.abs(back["quats_wxyz"] * sign - q).max() <= 1.5e-3  # 7e-4 a stored component, 2x for the largest
    # the covariances are the turned ones (F cov F, F = diag(1, -1, -1))
    F = torch.diag(torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64))
    cov = gaussians.covariance_from_scales_quats(torch.exp(torch.from_numpy(back["log_scales"])),
                                                 torch.from_numpy(back["quats_wxyz"]))  # fmt: skip
    want = F @ s.to(torch.float64).covariances @ F
    scale2 = torch.exp(2 * s.log_scales.double()).max(-1).values[:, None, None]
    assert ((cov - want).abs() / scale2).max() <= 0.1  # log-scales within 1/32: squares within 6.5%, + rotation
    # SH: the stored coefficients evaluated at a turned direction give the original colour there
    if degree:
        dirs = torch.nn.functional.normalize(torch.randn(len(s), 3, dtype=torch.float64), dim=-1)
        dc = s.sh_dc.double()[:, None]
        stored = torch.cat([dc, torch.from_numpy(back["sh_rest"])], 1)
        want = gaussians.eval_sh(torch.cat([dc, s.sh_rest.double()], 1), dirs, degree)
        got = gaussians.eval_sh(stored, dirs * torch.from_numpy(flip), degree)
        assert (got - want).abs().max() <= (degree + 1) ** 2 * 0.5 / 128  # |Y_lm| < 1 for l <= 3 at unit dirs
        # and each coefficient within 1/256 of the turned one
        assert np.abs(np.abs(back["sh_rest"]) - s.sh_rest.abs().double().numpy()).max() <= 0.5 / 128 + 1e-9


def test_spz_file_is_gzip_and_smaller_than_ply(tmp_path: Path) -> None:
    s = _scene(2000, 3, seed=3)
    spz = write_spz(tmp_path / "a.spz", s)
    ply = write_ply(tmp_path / "a.ply", s)
    assert spz.read_bytes()[:2] == b"\x1f\x8b"
    assert spz.stat().st_size < ply.stat().st_size / 3
    # reproducible: no write time in the gzip header, so the same splats give the same file
    assert spz.read_bytes()[4:8] == bytes(4) and encode_spz(s) == spz.read_bytes()
    assert read_spz_layout(spz.read_bytes())["means"].shape == (2000, 3)  # gzip still reads it


@pytest.mark.parametrize("suffix", [".spz", ".splat"])
def test_export_command(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = _scene(50, 3, seed=4)
    ply = write_ply(tmp_path / "splats.ply", s)
    assert main(["export", str(ply), "--to", suffix]) == 0
    out = ply.with_suffix(suffix)
    assert out.is_file() and f"written: {out}" in capsys.readouterr().out
    if suffix == ".splat":
        assert np.array_equal(read_splat_layout(out.read_bytes())["means"], read_ply(ply).means.numpy())
    else:
        assert np.abs(read_spz_layout(out.read_bytes())["means"][:, 0] - s.means[:, 0].double().numpy()).max() < 2e-4


def test_export_command_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path / "none.ply"), "--to", ".spz"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", str(tmp_path / "none.ply"), "--to", ".xyz"])


# ---- reading the web formats back (the viewer and `export` take them as inputs) ----------------------


@pytest.mark.parametrize("degree", [0, 3])
def test_read_spz_back_within_quantisation(tmp_path: Path, degree: int) -> None:
    from gsworkbench.io.spz import read_spz

    s = _scene(300, degree, seed=7 + degree)
    back = read_spz(write_spz(tmp_path / "a.spz", s), dtype=torch.float64)
    assert len(back) == len(s) and back.sh_degree == degree
    assert (back.means - s.means.double()).abs().max() <= 2.0**-13 + 1e-9  # 12 fractional bits, rounded
    assert (back.log_scales - s.log_scales.double()).abs().max() <= 1 / 32 + 1e-6
    assert (back.opacities - s.opacities.double()).abs().max() <= 0.5 / 255 + 1e-6
    assert (back.sh_dc - s.sh_dc.double()).abs().max() <= 0.5 / 38.25 + 1e-6
    q, q0 = gaussians.quat_normalize(back.quats), gaussians.quat_normalize(s.quats.double())
    assert torch.minimum((q - q0).abs().amax(1), (q + q0).abs().amax(1)).max() <= 2e-3  # q and -q: one rotation
    if degree:
        assert (back.sh_rest - s.sh_rest.double().clamp(-1, 127 / 128)).abs().max() <= 1 / 256 + 1e-6


def test_read_splat_back_within_quantisation(tmp_path: Path) -> None:
    from gsworkbench.io.dotsplat import read_splat

    s = _scene(200, 0, seed=3)
    back = read_splat(write_splat(tmp_path / "a.splat", s), dtype=torch.float64)
    assert back.sh_degree == 0 and torch.equal(back.means, s.means.double())
    assert torch.allclose(back.log_scales, s.log_scales.double(), atol=1e-6)
    rgb = (0.5 + gaussians.SH_C0 * s.sh_dc.double()).clamp(0, 1)
    assert ((0.5 + gaussians.SH_C0 * back.sh_dc) - rgb).abs().max() <= 0.5 / 255 + 1e-9
    alpha = s.opacities.double().clamp(0.5 / 255, 254.5 / 255)
    assert (back.opacities - alpha).abs().max() <= 0.5 / 255 + 1e-9 and torch.isfinite(back.opacity_logits).all()
    q0 = gaussians.quat_normalize(s.quats.double())
    assert torch.minimum((back.quats - q0).abs().amax(1), (back.quats + q0).abs().amax(1)).max() <= 1.5 / 128


def test_read_splats_takes_each_format_and_a_run_folder(tmp_path: Path) -> None:
    from gsworkbench.io.read import read_splats

    s = _scene(50, 1, seed=2)
    run = tmp_path / "run"
    run.mkdir()
    ply = write_ply(run / "splats.ply", s)
    for path in (ply, run, write_spz(tmp_path / "a.spz", s), write_splat(tmp_path / "a.splat", s)):
        assert len(read_splats(path)) == 50, path
    with pytest.raises(FileNotFoundError, match="none.spz: no such file"):
        read_splats(tmp_path / "none.spz")
    with pytest.raises(FileNotFoundError, match="is a folder with no splats.ply"):
        read_splats(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match=r"notes.txt: not a splat file .*\.ply, \.spz, \.splat"):
        read_splats(tmp_path / "notes.txt")
    (tmp_path / "bad.splat").write_bytes(b"\0" * 33)
    with pytest.raises(ValueError, match="bad.splat: not a .splat file"):
        read_splats(tmp_path / "bad.splat")
    (tmp_path / "bad.spz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="bad.spz: not a readable .spz file"):
        read_splats(tmp_path / "bad.spz")


def test_export_takes_a_run_folder_and_web_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = _scene(40, 2, seed=4)
    run = tmp_path / "run"
    run.mkdir()
    write_ply(run / "splats.ply", s)
    assert main(["export", str(run), "--to", ".splat"]) == 0
    assert (run / "splats.splat").stat().st_size == 32 * 40
    spz = write_spz(tmp_path / "b.spz", s)
    assert main(["export", str(spz), "--to", ".splat"]) == 0 and (tmp_path / "b.splat").is_file()
    capsys.readouterr()


def test_export_refuses_empty_files_and_folders_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = write_ply(tmp_path / "empty.ply", synthetic_splats(0, 0))
    assert main(["export", str(empty), "--to", ".spz"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "empty.ply: holds no splats" in err
    assert main(["export", str(tmp_path), "--to", ".spz"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a folder with no splats.ply" in err
