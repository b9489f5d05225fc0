"""The command line tells users what they can do, and refuses out-of-range arguments clearly."""

from __future__ import annotations

import argparse

import pytest

from gsworkbench import __version__
from gsworkbench.cli import main as cli


def _run(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_version(capsys):
    code, out, _ = _run(capsys, "--version")
    assert code == 0 and out.startswith(f"gsworkbench {__version__}")


def test_top_level_help_is_plain_text(capsys):
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and "``" not in out and "`" not in out.split("examples")[0]
    for command in ("run", "params", "run-all", "bench", "sync-notebooks", "env"):
        assert command in out


def test_bench_help_lists_every_suite_and_all(capsys):
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import list_suites

    assert set(cli.suite_summaries()) == set(list_suites())  # the fast listing matches the registry
    code, out, _ = _run(capsys, "bench", "--help")
    assert code == 0
    for name in [*list_suites(), "all"]:
        assert f"  {name} " in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "field", "--threads", "-3"], "argument --threads: expected a thread count from 1 to"),
        (["bench", "field", "--threads", "0"], "argument --threads: expected a thread count from 1 to"),
        (["bench", "field", "--threads", "many"], "expected a thread count"),
        (["bench", "field", "--min-run-time", "-1"], "argument --min-run-time: expected seconds in (0, 3600], got -1"),
        (["bench", "field", "--min-run-time", "0"], "expected seconds in (0, 3600], got 0"),
        (["bench", "field", "--min-run-time", "nan"], "expected seconds in (0, 3600]"),
        (["bench", "nope"], "argument SUITE: invalid choice: 'nope'"),
    ],
)
def test_out_of_range_arguments_are_refused(capsys, argv, message):
    code, _, err = _run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_thread_count_accepts_the_cores_here():
    import os

    assert cli.thread_count("1") == 1
    assert cli.thread_count(str(os.cpu_count())) == os.cpu_count()
    with pytest.raises(argparse.ArgumentTypeError):
        cli.thread_count(str((os.cpu_count() or 1) + 1))


def test_params_lists_types_defaults_and_allowed_values(capsys):
    from gsworkbench.jupyter import list_notebooks

    nb = next(p for p in list_notebooks() if p.name.startswith("01_"))
    assert cli.main(["params", str(nb)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("num_gaussians"))
    assert "int" in line and "512" in line and ">= 1" in line
    backend = next(ln for ln in out.splitlines() if ln.strip().startswith("backend "))
    assert "one of 'loop', 'vectorized', 'torch', 'numba', 'ext'" in backend
    assert "list[str]" in out and "-p num_gaussians 32" in out


def test_bench_cases_selects_by_name_and_refuses_no_match(capsys, tmp_path, monkeypatch):
    import gsworkbench.studies.suites  # noqa: F401  (registers the built-in suites)
    from gsworkbench.bench import run_suite

    table = run_suite("field", quick=True, min_run_time=0.01, progress=False, cases=r"/ext/.*forward\+backward$")
    assert len(table) > 0 and all("/ext/" in c and c.endswith("forward+backward") for c in table["case"])
    with pytest.raises(ValueError, match="matches no case of suite 'field'"):
        run_suite("field", quick=True, cases="no-such-case")
    with pytest.raises(ValueError, match="not a regular expression"):
        run_suite("field", quick=True, cases="(")
    monkeypatch.chdir(tmp_path)
    code = cli.main(["bench", "field", "--quick", "--cases", "no-such-case"])
    err = capsys.readouterr().err
    assert code == 2 and "matches no case" in err and "Traceback" not in err
