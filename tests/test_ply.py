"""Inria 3DGS PLY: bit-exact round trips, files from other tools, clear errors, atomic writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from plyfile import PlyData, PlyElement

from gsworkbench.core.splats import SplatSet, synthetic_splats
from gsworkbench.io import read_ply, write_ply
from gsworkbench.io.ply import ply_properties

FIELDS = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")


def assert_bit_exact(a: SplatSet, b: SplatSet) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == torch.float32 and x.shape == y.shape, name
        assert torch.equal(x.view(torch.int32), y.view(torch.int32)), name


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_round_trip_bit_exact(tmp_path: Path, degree: int) -> None:
    s = synthetic_splats(257, degree, seed=degree)
    s.quats[0] = torch.tensor([-0.0, 1e-30, 3.4e38, -1.0])  # odd values survive too
    path = write_ply(tmp_path / "a.ply", s)
    back = read_ply(path)
    assert back.sh_degree == degree
    assert_bit_exact(s, back)
    write_ply(tmp_path / "b.ply", back)
    assert (tmp_path / "a.ply").read_bytes() == (tmp_path / "b.ply").read_bytes()


def test_layout_is_inria(tmp_path: Path) -> None:
    s = synthetic_splats(10, 3)
    ply = PlyData.read(str(write_ply(tmp_path / "a.ply", s)))
    assert ply.header.splitlines()[1] == "format binary_little_endian 1.0"
    props = [p.name for p in ply["vertex"].properties]
    assert props == ply_properties(3) and len(props) == 62
    assert all(p.val_dtype in ("f4", "float32") for p in ply["vertex"].properties)
    v = ply["vertex"].data
    # f_rest is channel-major: f_rest_{c*K + k} = sh_rest[:, k, c]
    for c in range(3):
        for k in (0, 7, 14):
            assert np.array_equal(v[f"f_rest_{c * 15 + k}"], s.sh_rest[:, k, c].numpy())
    assert np.array_equal(v["rot_0"], s.quats[:, 0].numpy())
    assert np.array_equal(v["opacity"], s.opacity_logits.numpy())
    assert np.array_equal(v["scale_2"], s.log_scales[:, 2].numpy()) and not v["nx"].any()


def _write_custom(path: Path, props: list[tuple[str, str]], n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    arr = np.empty(n, dtype=[(name, t) for name, t in props])
    for name, _ in props:
        arr[name] = rng.standard_normal(n)
    PlyData([PlyElement.describe(arr, "vertex")], text=False).write(str(path))
    return arr


def test_other_tools_files_load(tmp_path: Path) -> None:
    """Extra properties, no normals, shuffled order, float64 and big-endian all load."""
    base = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2"] + [f"f_rest_{i}" for i in range(9)] + [
        "opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]  # fmt: skip
    props = [("red", "u1"), *[(p, "f4") for p in reversed(base)], ("extra", "f8")]
    arr = _write_custom(tmp_path / "a.ply", props, 20)
    s = read_ply(tmp_path / "a.ply")
    assert s.sh_degree == 1 and len(s) == 20
    assert np.array_equal(s.sh_rest[:, 2, 1].numpy(), arr["f_rest_5"])
    assert np.array_equal(s.means[:, 1].numpy(), arr["y"])
    arr64 = _write_custom(tmp_path / "b.ply", [(p, "f8") for p in base], 5)
    assert np.array_equal(read_ply(tmp_path / "b.ply").quats[:, 3].numpy(), arr64["rot_3"].astype(np.float32))
    s = synthetic_splats(7, 2)
    write_ply(tmp_path / "c.ply", s)
    ply = PlyData.read(str(tmp_path / "c.ply"))
    ply.byte_order = ">"
    ply.write(str(tmp_path / "d.ply"))
    assert_bit_exact(read_ply(tmp_path / "d.ply"), s)


def test_bad_files_give_clear_errors(tmp_path: Path) -> None:
    s = synthetic_splats(100, 3)
    good = write_ply(tmp_path / "good.ply", s).read_bytes()
    (tmp_path / "trunc.ply").write_bytes(good[: len(good) - 1000])
    with pytest.raises(ValueError, match="trunc.ply: truncated or corrupt"):
        read_ply(tmp_path / "trunc.ply")
    (tmp_path / "garbage.ply").write_bytes(b"\x00\x01garbage" * 10)
    with pytest.raises(ValueError, match="truncated or corrupt"):
        read_ply(tmp_path / "garbage.ply")
    (tmp_path / "empty.ply").write_bytes(b"")
    with pytest.raises(ValueError, match="truncated or corrupt"):
        read_ply(tmp_path / "empty.ply")
    _write_custom(tmp_path / "mesh.ply", [("x", "f4"), ("y", "f4"), ("z", "f4")], 4)
    with pytest.raises(ValueError, match="missing 3DGS vertex properties f_dc_0"):
        read_ply(tmp_path / "mesh.ply")
    arr = np.zeros(3, dtype=[("vertex_indices", "i4")])
    PlyData([PlyElement.describe(arr, "face")]).write(str(tmp_path / "face.ply"))
    with pytest.raises(ValueError, match="no 'vertex' element"):
        read_ply(tmp_path / "face.ply")
    base = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
            "rot_0", "rot_1", "rot_2", "rot_3"]  # fmt: skip
    _write_custom(tmp_path / "rest.ply", [(p, "f4") for p in base + ["f_rest_0", "f_rest_1"]], 3)
    with pytest.raises(ValueError, match="f_rest"):
        read_ply(tmp_path / "rest.ply")
    bad = s.clone()
    write_ply(tmp_path / "src.ply", bad)
    ply = PlyData.read(str(tmp_path / "src.ply"))
    ply["vertex"].data["opacity"][3] = np.nan
    ply.write(str(tmp_path / "nan.ply"))
    with pytest.raises(ValueError, match="nan.ply: opacity_logits contains non-finite"):
        read_ply(tmp_path / "nan.ply")
    with pytest.raises(FileNotFoundError, match="missing.ply: no such file"):
        read_ply(tmp_path / "missing.ply")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        read_ply(tmp_path)


def test_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = synthetic_splats(50, 1)
    path = write_ply(tmp_path / "a.ply", s)
    before = path.read_bytes()

    def boom(self, stream):  # noqa: ANN001, ANN202
        stream.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(PlyData, "write", boom)
    with pytest.raises(OSError, match="disk full"):
        write_ply(path, synthetic_splats(60, 1))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ply"]  # no temporary left behind


def test_float64_splats_written_as_float32(tmp_path: Path) -> None:
    s = synthetic_splats(20, 1, dtype=torch.float64)
    with pytest.warns(UserWarning, match="float64 splats are stored as float32"):
        back = read_ply(write_ply(tmp_path / "a.ply", s))
    assert back.means.dtype == torch.float32
    assert_bit_exact(back, s.to(torch.float32))


@pytest.mark.parametrize("fmt", ["ascii 1.0", "binary_little_endian 1.0"])
def test_a_header_count_the_file_cannot_hold_is_one_line_before_any_allocation(tmp_path: Path, fmt: str) -> None:
    """An ASCII PLY claiming 2e9 vertices gave a MemoryError whose message dumped the whole dtype."""
    path = tmp_path / "huge.ply"
    props = "".join(f"property float {p}\n" for p in ("x", "y", "z", "opacity"))
    path.write_bytes(f"ply\nformat {fmt}\nelement vertex 2000000000\n{props}end_header\n".encode() + b"0 0 0 0\n")
    with pytest.raises(ValueError) as info:
        read_ply(path)
    message = str(info.value)
    assert "\n" not in message and len(message) < 300
    assert message.startswith(f"{path}: truncated or corrupt PLY file") and "2000000000 vertex" in message


@pytest.mark.parametrize("text", [False, True])
def test_more_vertices_than_the_header_declares_warns(tmp_path: Path, text: bool) -> None:
    """A header declaring fewer vertices than the body holds was read as declared, without a word."""
    import warnings

    from gsworkbench.io.ply import PlyExtraDataWarning

    s = synthetic_splats(10, 1)
    write_ply(tmp_path / "src.ply", s)
    src = PlyData.read(str(tmp_path / "src.ply"))
    src.text = text
    src.write(str(tmp_path / "full.ply"))
    data = (tmp_path / "full.ply").read_bytes()
    (tmp_path / "short.ply").write_bytes(data.replace(b"element vertex 10\n", b"element vertex 7\n", 1))
    with pytest.warns(PlyExtraDataWarning, match=r"short.ply: the header declares 7 vertex elements.* ignored"):
        back = read_ply(tmp_path / "short.ply")
    assert len(back) == 7
    if not text:
        with pytest.warns(PlyExtraDataWarning, match=r"about 3 more vertex elements"):
            read_ply(tmp_path / "short.ply")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlyExtraDataWarning)
        assert len(read_ply(tmp_path / "full.ply")) == 10
