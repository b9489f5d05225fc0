"""The environment files agree: environment.yml (conda), requirements.txt (pip), pyproject.toml (the
package and its build), and the installed packages satisfy their pins."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from setuptools.config.pyprojecttoml import load_file, read_configuration

ROOT = Path(__file__).resolve().parent.parent


def _name(spec: str) -> str:
    return re.split(r"[=<>!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _requirement_lines() -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines())
    return [line for line in lines if line]


def pip_packages() -> dict[str, str]:
    return {_name(line): line for line in _requirement_lines()}


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


def _pin(spec: str) -> str:
    """The version constraint of a pip or conda spec, pip-style: "torch==2.13.0" and conda's
    "torch=2.13.0" both give "==2.13.0"; an unpinned name gives ""."""
    rest = spec.strip()[len(_name(spec)) :].replace(" ", "")
    return "=" + rest if re.fullmatch(r"=[^=].*", rest) else rest


def test_pins_agree_everywhere():
    """Each package is pinned alike by pip and conda, and the torch the extension is built against
    (pyproject's build requirements) is the torch it runs with (a mismatch breaks the _C ABI)."""
    pip, conda = pip_packages(), conda_packages()
    differ = {n: (pip[n], conda[n]) for n in set(pip) & set(conda) if _pin(pip[n]) != _pin(conda[n])}
    assert not differ, f"pinned differently by requirements.txt and environment.yml: {differ}"
    build = load_file(ROOT / "pyproject.toml")["build-system"]["requires"]  # tomllib is 3.11+
    build_torch = [spec for spec in build if _name(spec) == "torch"]
    assert [_pin(spec) for spec in build_torch] == [_pin(pip["torch"])], (build_torch, pip["torch"])


def test_installed_packages_satisfy_the_pins():
    """The environment the tests run in is the one requirements.txt asks for (pinned versions)."""
    wrong = {}
    for spec in pip_packages().values():
        req = Requirement(spec)
        if req.specifier and not req.specifier.contains(version(req.name).split("+")[0], prereleases=True):
            wrong[req.name] = (str(req.specifier), version(req.name))
    assert not wrong, f"installed versions outside requirements.txt's pins: {wrong}"


def test_pyproject_dependencies_are_requirements_txt():
    """What ``pip install .`` installs, as setuptools expands pyproject.toml, is requirements.txt."""
    deps = read_configuration(ROOT / "pyproject.toml", expand=True)["project"]["dependencies"]
    assert [_name(d) for d in deps] == [_name(spec) for spec in _requirement_lines()]
    assert [_pin(d) for d in deps] == [_pin(spec) for spec in _requirement_lines()]
