"""Commit subjects a reader can scan: every commit after :data:`CHECKED_AFTER`, merges included, says
in at most :data:`MAX_SUBJECT_CHARS` characters what changed (the why, figures and alternatives go
in the body). Runs on the checkout's git history; skipped where there is none to read."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The last commit before the rule was set (issue 50, "commits a reader can scan"). The subjects before
# it were written under no limit, and published history is not rewritten, so only later ones are held
# to it.
CHECKED_AFTER = "e3533594baf13ea4cb3cdf76b33a79d082564c19"
MAX_SUBJECT_CHARS = 72


def long_subjects(commits: Iterable[tuple[str, str]], limit: int = MAX_SUBJECT_CHARS) -> list[str]:
    """One line per (hash, subject) in ``commits`` whose subject is over ``limit`` characters (not
    bytes: a subject may hold any Unicode), naming the commit and the subject's length."""
    return [f"{sha} ({len(subject)} > {limit} chars): {subject}" for sha, subject in commits if len(subject) > limit]


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, encoding="utf-8")


def commits_to_check() -> list[tuple[str, str]]:
    """(short hash, subject) of every commit in ``CHECKED_AFTER..HEAD``, merges included; skips the
    test where that range cannot be read (no git, not a checkout, the base commit not in the history)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: no history to check")
    if _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout: no history to check")
    if _git("cat-file", "-e", f"{CHECKED_AFTER}^{{commit}}").returncode != 0:
        shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        why = "this shallow clone's history begins after it" if shallow else "this history does not hold it"
        pytest.skip(f"the commits to check follow {CHECKED_AFTER[:7]}, and {why}: they cannot be told apart")
    log = _git("log", "--format=%h%x00%s", f"{CHECKED_AFTER}..HEAD")
    assert log.returncode == 0, log.stderr
    return [tuple(line.split("\0", 1)) for line in log.stdout.splitlines()]  # type: ignore[misc]


def test_long_subjects_are_named_with_their_length() -> None:
    commits = [
        ("aaa1111", "ci: one subject of a scannable length"),
        ("bbb2222", "x" * 72),  # the limit itself is allowed
        ("ccc3333", "y" * 73),
        ("ddd4444", "Merge branch 'layers': " + "z" * 60),  # merges are commits like any other
        ("eee5555", "é" * 72),  # characters, not UTF-8 bytes (144 here)
    ]
    assert long_subjects(commits) == [
        f"ccc3333 (73 > 72 chars): {'y' * 73}",
        f"ddd4444 (83 > 72 chars): {commits[3][1]}",
    ]
    assert long_subjects(commits, limit=100) == []
    assert long_subjects([]) == []


def test_commit_subjects_after_the_rule_are_short() -> None:
    long = long_subjects(commits_to_check())
    assert not long, (
        f"{len(long)} commit subject(s) over {MAX_SUBJECT_CHARS} characters (say what changed in the subject, "
        "and the why in the body; `git rebase -i` with reword fixes an unpublished one):\n" + "\n".join(long)
    )
