"""Fuzzing the PLY reader: mutated valid files (truncated, bytes flipped in the header or the body,
wrong vertex counts, wrong property types) give a SplatSet or a ValueError naming the file, never
another exception (or a crash)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gsworkbench.core.splats import SplatSet, synthetic_splats
from gsworkbench.io import read_ply, write_ply

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


def _valid_files() -> dict[str, bytes]:
    """Valid 3DGS files: binary float32 (SH degree 1) and float64 (degree 0), 6 splats each."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        out["f32"] = write_ply(Path(d) / "a.ply", synthetic_splats(6, 1, seed=0)).read_bytes()
        double = synthetic_splats(6, 0, seed=1).to(torch.float64)
        out["f64"] = write_ply(Path(d) / "b.ply", double, torch.float64).read_bytes()
    return out


VALID = _valid_files()


def _split(data: bytes) -> tuple[bytes, bytes]:
    end = data.index(b"end_header\n") + len(b"end_header\n")
    return data[:end], data[end:]


def _check(tmp_path: Path, data: bytes) -> None:
    """read_ply on ``data`` returns splats or raises a ValueError that names the file."""
    path = tmp_path / "fuzzed.ply"
    path.write_bytes(data)
    try:
        out = read_ply(path)
    except ValueError as err:
        assert str(path) in str(err), err
    else:
        assert isinstance(out, SplatSet)


files = st.sampled_from(sorted(VALID))


@FUZZ
@given(name=files, frac=st.floats(0.0, 1.0))
def test_truncated(tmp_path: Path, name: str, frac: float) -> None:
    data = VALID[name]
    _check(tmp_path, data[: int(frac * (len(data) - 1))])


@FUZZ
@given(name=files, in_header=st.booleans(), flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)),
                                                          min_size=1, max_size=4))  # fmt: skip
def test_flipped_bytes(tmp_path: Path, name: str, in_header: bool, flips: list[tuple[float, int]]) -> None:
    header, body = (bytearray(p) for p in _split(VALID[name]))
    part = header if in_header else body
    for where, mask in flips:
        part[min(int(where * len(part)), len(part) - 1)] ^= mask
    _check(tmp_path, bytes(header + body))


@FUZZ
@given(name=files, count=st.one_of(st.integers(-3, 20), st.integers(2**31 - 2, 2**64 + 2), st.sampled_from(["x", ""])))
def test_wrong_vertex_count(tmp_path: Path, name: str, count: int | str) -> None:
    header, body = _split(VALID[name])
    header = re.sub(rb"element vertex \d+", f"element vertex {count}".encode(), header)
    _check(tmp_path, header + body)


TYPES = ["char", "uchar", "short", "ushort", "int", "uint", "float", "double", "int8", "float16", "string",
         "list uchar float", "list int int", "list uchar", ""]  # fmt: skip


@FUZZ
@given(name=files, retype=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TYPES)), min_size=1, max_size=3))
def test_wrong_property_types(tmp_path: Path, name: str, retype: list[tuple[int, str]]) -> None:
    header, body = _split(VALID[name])
    lines = header.split(b"\n")
    props = [i for i, line in enumerate(lines) if line.startswith(b"property ")]
    for which, new_type in retype:
        i = props[which % len(props)]
        prop_name = lines[i].split()[-1]
        lines[i] = b" ".join(filter(None, [b"property", new_type.encode(), prop_name]))
    _check(tmp_path, b"\n".join(lines) + body)


def test_the_valid_files_read(tmp_path: Path) -> None:
    """The files the fuzzer mutates are read as they are (so a mutation is what breaks them)."""
    for name, data in VALID.items():
        path = tmp_path / f"{name}.ply"
        path.write_bytes(data)
        assert len(read_ply(path)) == 6


_REQUIRED = b"".join(b"property float %s\n" % p.encode() for p in (
    "y z f_dc_0 f_dc_1 f_dc_2 opacity scale_0 scale_1 scale_2 rot_0 rot_1 rot_2 rot_3".split()))
ODD = {
    "ascii overflow": b"ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nend_header\n1e999\n",
    "short list": b"ply\nformat binary_little_endian 1.0\nelement vertex 2\nproperty list uchar float x\n"
    b"end_header\n\x05",
    "list-typed x": b"ply\nformat ascii 1.0\nelement vertex 1\nproperty list uchar float x\n" + _REQUIRED
    + b"end_header\n2 1.0 2.0 0 0 0 0 0 0 0 0 0 1 0 0 0\n",
}


@pytest.mark.parametrize("data", ODD.values(), ids=ODD.keys())
def test_odd_inputs(tmp_path: Path, data: bytes) -> None:
    _check(tmp_path, data)
