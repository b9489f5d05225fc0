"""Every command the README shows parses: each `gsworkbench ...` line through the CLI's own parser
(nothing runs), each `make X` names a Makefile target, and each notebook it names has a source."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from gsworkbench.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def shell_commands(text: str) -> list[list[str]]:
    """The commands of the ```bash blocks in ``text``, split as a shell would, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(words)
    return commands


def gsworkbench_args(words: list[str]) -> list[str] | None:
    """The arguments after the ``gsworkbench`` program in ``words`` (None when it is another program)."""
    return words[1:] if Path(words[0]).name == "gsworkbench" else None


def makefile_targets(makefile: Path) -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", makefile.read_text(), flags=re.M))


COMMANDS = shell_commands(README.read_text())


def test_readme_shows_commands():
    assert any(gsworkbench_args(c) for c in COMMANDS), "the README shows no gsworkbench command"
    assert any(c[0] == "make" for c in COMMANDS), "the README shows neither of the two make commands"


@pytest.mark.parametrize("words", [c for c in COMMANDS if gsworkbench_args(c) is not None], ids=" ".join)
def test_gsworkbench_command_parses(words):
    args = gsworkbench_args(words)
    try:
        build_parser().parse_args(args)
    except SystemExit as exit_:
        pytest.fail(f"README command does not parse (exit {exit_.code}): {' '.join(words)}")
    for word in args:  # a notebook the README names must exist as its reviewed source
        if word.startswith("notebooks/") and word.endswith(".ipynb"):
            assert (ROOT / word).with_suffix(".py").exists(), f"README names a missing notebook: {word}"


@pytest.mark.parametrize("words", [c for c in COMMANDS if c[0] == "make"], ids=" ".join)
def test_make_target_exists(words):
    missing = [t for t in words[1:] if not t.startswith("-") and t not in makefile_targets(ROOT / "Makefile")]
    assert not missing, f"README's `{' '.join(words)}` names no Makefile target: {missing}"


def test_checker_catches_a_bad_command():
    """The parser check can fail: an unknown subcommand and an unknown option are refused."""
    for bad in (["no-such-command"], ["bench", "field", "--no-such-option"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(bad)
    text = "```bash\nmake run   # a comment\n.venv/bin/gsworkbench env\n```\n"
    assert shell_commands(text) == [["make", "run"], [".venv/bin/gsworkbench", "env"]]
