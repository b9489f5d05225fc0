"""The conda environment.yml names the same packages as the pip set-up (requirements.txt)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(spec: str) -> str:
    return re.split(r"[=<>!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pip_packages() -> dict[str, str]:
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out[_name(line)] = line
    return out


def conda_packages() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    out = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for spec in dep.get("pip", []):
                out[_name(spec)] = spec
        elif _name(dep) not in ("python", "pip"):
            out[_name(dep)] = dep
    return out


def test_same_package_names():
    pip, conda = pip_packages(), conda_packages()
    assert set(pip) == set(conda), f"only pip: {set(pip) - set(conda)}; only conda: {set(conda) - set(pip)}"


def test_torch_is_pinned_in_both():
    assert pip_packages()["torch"].replace(" ", "") == "torch==2.13.0"
    assert conda_packages()["torch"].replace(" ", "") == "torch==2.13.0"


def test_pyproject_reads_requirements():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dependencies = { file = ["requirements.txt"] }' in text
