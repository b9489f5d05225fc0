"""Baseline against candidate: raw samples in the store, the significance rule, mismatches, revisions."""

from __future__ import annotations

import json
import subprocess
import textwrap

import numpy as np
import pandas as pd
import pytest
from fake_clock import FakeClock

from gsworkbench.bench import Case, run_cases, save_run
from gsworkbench.bench.compare import compare_runs, compare_samples, min_p_value
from gsworkbench.bench.revisions import compare_revisions
from gsworkbench.bench.store import load_bench_run

# Every test here times calls on a FakeClock that only the calls advance: the statistics (samples,
# verdicts) are the same on a loaded machine as on a quiet one. Real clocks are measured by the
# benchmarks themselves, and by the revisions test below, which asserts only structure.


def delay_cases(clock: FakeClock, delay: float, backends=("a", "b")) -> list[Case]:
    return [Case(f"unit/{b}", {"backend": b, "n": 1}, clock.case(delay)) for b in backends]


def stored_run(tmp_path, delay: float, suite: str = "unit", **params) -> object:
    clock = FakeClock()
    df = run_cases(delay_cases(clock, delay), threads=1, min_run_time=0.05, progress=False, clock=clock)
    return save_run(suite, df, {"suite": suite, "quick": True, **params}, root=tmp_path)


def paired_runs(tmp_path, base_delay: float, cand_delay: float, min_run_time: float = 0.5) -> tuple:
    """Baseline and candidate timed in one interleaved run (as the revisions path does), stored as two runs."""
    clock = FakeClock()
    cases = [Case(f"unit/{b}/{side}", {"backend": b, "n": 1, "side": side}, clock.case(d))
             for b in ("a", "b") for side, d in (("base", base_delay), ("cand", cand_delay))]  # fmt: skip
    df = run_cases(cases, threads=1, min_run_time=min_run_time, progress=False, clock=clock)
    df["case"] = df["case"].str.rsplit("/", n=1).str[0]
    return tuple(
        save_run("unit", df[df.side == side].drop(columns="side"), {"suite": "unit", "quick": True}, root=tmp_path)
        for side in ("base", "cand")
    )


def test_runs_keep_every_rounds_samples(tmp_path):
    run = load_bench_run(stored_run(tmp_path, 0.001))
    assert run.has_samples
    for _, row in run.table.iterrows():
        assert len(row.samples_s) == row.runs == 10
        assert row.median_s == pytest.approx(np.median(row.samples_s))
        assert all(abs(s / 0.001 - 1) < 0.1 for s in row.samples_s)  # seconds per call (2% spread)


def test_run_against_itself_is_no_change(tmp_path):
    run = stored_run(tmp_path, 0.001)
    cmp = compare_runs(run, run)
    assert set(cmp.table.verdict) == {"no significant change"} and cmp.exit_code == 0
    assert (cmp.table.ratio == 1.0).all() and (cmp.table.p_value == 1.0).all()
    assert "Mann-Whitney U" in cmp.to_markdown() and "Mann-Whitney U" in cmp.to_text()


def test_injected_20_percent_delay_is_flagged_and_exits_1(tmp_path):
    base, cand = paired_runs(tmp_path, 0.02, 0.024)
    cmp = compare_runs(base, cand)
    assert set(cmp.table.verdict) == {"slower"}, cmp.to_text()
    assert cmp.exit_code == 1
    assert ((cmp.table.ratio_ci_low > 1.05) & (cmp.table.ratio_ci_high < 1.4)).all()  # the true ratio: 1.2
    back = compare_runs(cand, base)  # the other way round: faster, exit 0
    assert set(back.table.verdict) == {"faster"} and back.exit_code == 0
    files = cmp.write(tmp_path / "out")
    assert pd.read_csv(files["csv"]).verdict.tolist() == ["slower", "slower"]
    assert "| case | metric | baseline |" in files["md"].read_text()


def test_cli_compare_exit_codes(tmp_path, capsys):
    from gsworkbench.cli.main import main

    base, cand = paired_runs(tmp_path, 0.02, 0.024)
    assert main(["compare", str(base), str(cand), "--out", str(tmp_path / "c1")]) == 1
    assert "slower" in capsys.readouterr().out and (tmp_path / "c1" / "compare.md").exists()
    assert main(["compare", str(base), str(base), "--out", str(tmp_path / "c2")]) == 0
    assert main(["compare", str(base), "HEAD"]) == 2  # one folder and one revision: a clear error
    assert "two run folders or two git revisions" in capsys.readouterr().err


def test_one_percent_within_noise_is_not_flagged(seed):
    rng = np.random.default_rng(seed)
    base = 1e-3 * rng.lognormal(0.0, 0.05, 10)
    cand = 1.01e-3 * rng.lognormal(0.0, 0.05, 10)
    out = compare_samples(list(base), list(cand))
    assert out["verdict"] == "no significant change"
    assert out["ratio_ci_low"] < 1.01 < out["ratio_ci_high"]
    # a real 20% change in the same noise is found, and a 1% change without noise is below the threshold
    assert compare_samples(list(base), list(1.2 * base))["verdict"] == "slower"
    tight = 1e-3 + 1e-7 * np.arange(10)
    assert compare_samples(list(tight), list(1.01 * tight))["verdict"] == "no significant change"


def test_few_or_no_samples_are_named():
    assert min_p_value(3, 3) > 0.002 and min_p_value(10, 10) < 1e-4
    assert compare_samples([1.0, 1.0, 1.0], [2.0, 2.0, 2.0])["verdict"].startswith("too few samples")
    old = compare_samples(None, None, base_median=1.0, cand_median=2.0)
    assert old["verdict"] == "no samples" and old["ratio"] == 2.0


def test_old_runs_without_samples_are_read(tmp_path):
    run = stored_run(tmp_path, 0.001)
    table = pd.read_csv(run / "unit.csv").drop(columns="samples_s")
    table.to_csv(run / "unit.csv", index=False)
    old = load_bench_run(run)
    assert not old.has_samples
    cmp = compare_runs(run, run)
    assert set(cmp.table.verdict) == {"no samples"} and cmp.exit_code == 0
    assert any("no raw samples" in w for w in cmp.warnings)


def test_mismatched_runs_are_refused(tmp_path):
    base = stored_run(tmp_path, 0.001)
    with pytest.raises(ValueError, match="different suites"):
        compare_runs(base, stored_run(tmp_path, 0.001, suite="other"))
    with pytest.raises(ValueError, match="different parameter 'quick'"):
        compare_runs(base, stored_run(tmp_path, 0.001, quick=False))
    clock = FakeClock()
    df = run_cases(delay_cases(clock, 0.001, ("a", "c")), threads=1, min_run_time=0.02, progress=False, clock=clock)
    other_cases = save_run("unit", df, {"suite": "unit", "quick": True}, root=tmp_path)
    with pytest.raises(ValueError, match="different cases"):
        compare_runs(base, other_cases)
    with pytest.raises(ValueError, match="not a benchmark run"):
        compare_runs(base, tmp_path)


def test_environment_differences_are_warned(tmp_path):
    base, cand = stored_run(tmp_path, 0.001), stored_run(tmp_path, 0.001)
    meta = json.loads((cand / "metadata.json").read_text())
    meta["cpu_model"] = "Another CPU"
    meta["packages"]["torch"] = "9.9"
    (cand / "metadata.json").write_text(json.dumps(meta))
    warnings = compare_runs(base, cand).warnings
    assert any("different CPU" in w for w in warnings) and any("torch version" in w for w in warnings)


TINY_SUITE = """
import time
from gsworkbench.bench.registry import Case, Prepared, register_suite

DELAY = {delay}

def busy(seconds):
    time.sleep(seconds)

def counted():  # a case that counts its work: the roofline columns
    return Prepared(lambda: busy(DELAY), {{"bytes_per_call": 1e6}})

@register_suite("tiny", "busy-wait cases")
def cases(quick):
    plain = lambda: (lambda: busy(DELAY))
    return [Case("tiny/x", {{"backend": "x"}}, plain), Case("tiny/y", {{"backend": "y"}}, counted)]
"""


SUITES = "gsworkbench.studies.suites"  # the fake repository's module that registers its suite


def test_compare_two_git_revisions_in_worktrees(tmp_path):
    """The revisions path end to end on a small repository (no extension to build): each revision in
    its own worktree and worker process, interleaved, each run stored with its samples and commit."""
    repo = tmp_path / "repo"
    suites = repo / "gsworkbench" / "studies" / "suites"
    suites.mkdir(parents=True)
    (repo / "gsworkbench" / "bench").mkdir()
    from gsworkbench.bench import registry

    (repo / "gsworkbench" / "bench" / "registry.py").write_text(open(registry.__file__).read())
    for init in (repo / "gsworkbench", repo / "gsworkbench" / "bench", repo / "gsworkbench" / "studies"):
        (init / "__init__.py").write_text("")
    (suites / "__init__.py").write_text("from gsworkbench.studies.suites import tiny  # noqa: F401\n")

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    for delay, msg in ((0.02, "base"), (0.024, "slower")):
        (suites / "tiny.py").write_text(textwrap.dedent(TINY_SUITE.format(delay=delay)))
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", msg)
    base_dir, cand_dir = compare_revisions(
        "HEAD~1", "HEAD", "tiny", suites_module=SUITES, min_run_time=0.5, build=False, repo=repo,
        root=tmp_path / "results", progress=False,
    )  # fmt: skip
    cmp = compare_runs(base_dir, cand_dir)
    # real clocks in the workers: only the structure is asserted (the verdict depends on the machine's
    # load; the FakeClock tests above check the statistics), and that no sample beats its sleep
    assert list(cmp.table.case) == ["tiny/x", "tiny/y"], cmp.to_text()
    assert cmp.table.verdict.isin(["slower", "faster", "no significant change"]).all(), cmp.to_text()
    assert cmp.exit_code == int((cmp.table.verdict == "slower").any())
    base, cand = load_bench_run(base_dir), load_bench_run(cand_dir)
    assert base.has_samples and cand.has_samples
    for run, delay in ((base, 0.02), (cand, 0.024)):
        assert all(min(row.samples_s) >= delay and len(row.samples_s) == row.runs for _, row in run.table.iterrows())
    assert base.commit != cand.commit
    assert (repo / "build" / "revisions").is_dir()
    # timed together: one interleaving id, so compare judges them paired
    assert base.metadata["interleaved"]["id"] == cand.metadata["interleaved"]["id"]
    assert (base.metadata["interleaved"]["role"], cand.metadata["interleaved"]["role"]) == ("baseline", "candidate")
    assert cmp.rule.startswith("Wilcoxon signed-rank")
    # the roofline columns from the case's extras (its worker's) against the driver's ceilings
    for run in (base, cand):
        y = run.table.set_index("case").loc["tiny/y"]
        assert y.bytes_per_call == 1e6 and y.gbs == pytest.approx(1e6 / y.median_s / 1e9)
        assert "ceilings" in run.metadata and np.isnan(run.table.set_index("case").loc["tiny/x", "gbs"])
        if "skipped" not in run.metadata["ceilings"]:
            assert y.pct_of_peak == pytest.approx(100 * y.gbs / run.metadata["ceilings"]["bandwidth_gbs"])
    assert "baseline % of roof" in cmp.display_table() or "skipped" in base.metadata["ceilings"]
    # --cases: only the matching cases are timed; a pattern matching none is refused
    base_dir, cand_dir = compare_revisions("HEAD~1", "HEAD", "tiny", suites_module=SUITES, min_run_time=0.1,
                                           build=False, repo=repo, root=tmp_path / "results", progress=False,
                                           cases="/y$")  # fmt: skip
    assert list(compare_runs(base_dir, cand_dir).table.case) == ["tiny/y"]
    with pytest.raises(ValueError, match="matches no case"):
        compare_revisions("HEAD~1", "HEAD", "tiny", suites_module=SUITES, build=False, repo=repo,
                          root=tmp_path / "results", progress=False, cases="nothing")  # fmt: skip
    with pytest.raises(ValueError, match="unknown git revision 'nope'"):
        compare_revisions("nope", "HEAD", "tiny", suites_module=SUITES, build=False, repo=repo,
                          root=tmp_path / "results")  # fmt: skip


def test_two_backends_of_one_run(tmp_path):
    """torch against ext style: two backends of one interleaved run, case by case."""
    from gsworkbench.bench.compare import select_backend

    clock = FakeClock()
    cases = [Case(f"unit/{b}/n{n}", {"backend": b, "n": n}, clock.case(d))
             for n in (1, 2) for b, d in (("slow", 0.012), ("fast", 0.01))]  # fmt: skip
    cases.append(Case("unit/fast/n3", {"backend": "fast", "n": 3}, clock.case(0.01)))  # no 'slow' twin
    df = run_cases(cases, threads=1, min_run_time=0.3, progress=False, clock=clock)
    derived = pd.DataFrame([{"backend": b, "n": 1, "median_s": 0.001} for b in ("slow", "fast")])  # no case name
    run = save_run("unit", pd.concat([df, derived], ignore_index=True), {"suite": "unit"}, root=tmp_path)
    cmp = compare_runs(run, run, backends=("slow", "fast"))
    assert list(cmp.table.case) == ["unit/*/n1", "unit/*/n2"]
    assert any("one backend only" in w and "unit/*/n3" in w for w in cmp.warnings)
    assert set(cmp.table.verdict) == {"faster"} and cmp.exit_code == 0, cmp.to_text()
    assert "[backend fast]" in cmp.candidate
    with pytest.raises(ValueError, match="no backend 'nope'"):
        select_backend(load_bench_run(run), "nope")


# ---- the one statistics rule (gsworkbench.bench.significance), as both commands apply it -----------------------

FIXED_BEFORE = [1.00, 1.02, 0.99, 1.01, 0.98, 1.03, 1.005, 0.97, 1.015, 1.025]  # seconds, 2% spread, no ties


def test_the_rule_finds_a_clear_difference_and_not_identical_samples():
    from gsworkbench.bench import significance

    after = [1.3 * x for x in FIXED_BEFORE]
    slower = significance.compare_samples(FIXED_BEFORE, after)
    assert slower["verdict"] == significance.SLOWER and slower["p_value"] < significance.ALPHA
    assert slower["ratio"] == pytest.approx(1.3) and slower["ratio_ci_low"] <= 1.3 <= slower["ratio_ci_high"]
    assert significance.compare_samples(after, FIXED_BEFORE)["verdict"] == significance.FASTER
    same = significance.compare_samples(FIXED_BEFORE, list(reversed(FIXED_BEFORE)))
    assert same["verdict"] == significance.NO_CHANGE and same["p_value"] == 1.0 and same["ratio"] == 1.0
    # a shifted copy whose sets interleave: the medians differ by 1%, within the threshold and the noise
    close = significance.compare_samples(FIXED_BEFORE, [x + 0.01 for x in FIXED_BEFORE])
    assert close["verdict"] == significance.NO_CHANGE
    # 7 a side is the least that can reach p < 0.002; 6 cannot, whatever the samples
    assert significance.min_samples() == 7
    assert significance.compare_samples(FIXED_BEFORE[:6], after[:6])["verdict"] == "too few samples (6 vs 6)"
    assert significance.compare_samples(FIXED_BEFORE[:7], after[:7])["verdict"] == significance.SLOWER
    with pytest.raises(ValueError, match="samples on both sides"):
        significance.compare_samples([], after)


def test_the_rule_text_names_test_level_and_counts():
    from gsworkbench.bench import significance

    text = significance.rule_text(counts=[10, 10])
    assert text.startswith("Mann-Whitney U (two-sided), p < 0.002, n=10,") and "5%" in text
    paired = significance.rule_text(counts=[10, 10], paired=True)
    assert paired.startswith("Wilcoxon signed-rank (two-sided)") and "n=10" in paired and "rounds resampled" in paired
    assert "n=3-10" in significance.rule_text(counts=[3, 10]) and "p < 0.01" in significance.rule_text(alpha=0.01)


# a machine slowing down and speeding up over ten rounds (factors up to 1.6): both samples of a round
# share the round's factor, as in interleaved timing
DRIFT = [1.0, 1.25, 1.6, 1.1, 1.45, 1.05, 1.3, 1.55, 1.15, 1.4]


def test_the_paired_rule_sees_through_drift_that_hides_a_change_from_the_unpaired_one():
    from gsworkbench.bench import significance

    before = [b * d for b, d in zip(FIXED_BEFORE, DRIFT)]
    after = [0.93 * b * d * (1 + 0.004 * (i % 3 - 1)) for i, (b, d) in enumerate(zip(FIXED_BEFORE, DRIFT))]
    assert significance.compare_samples(before, after)["verdict"] == significance.NO_CHANGE  # the drift hides 7%
    faster = significance.compare_paired(before, after)
    assert faster["verdict"] == significance.FASTER and faster["p_value"] == pytest.approx(2 / 2**10)
    assert faster["ratio"] == pytest.approx(0.93, abs=0.005)
    assert faster["ratio_ci_low"] <= faster["ratio"] <= faster["ratio_ci_high"] < 1
    assert significance.compare_paired(after, before)["verdict"] == significance.SLOWER
    # one round against the rest: not significant; a 2% change in every round: below the threshold
    mixed = [a if i else 1.2 * b for i, (a, b) in enumerate(zip(after, before))]
    assert significance.compare_paired(before, mixed)["verdict"] == significance.NO_CHANGE
    small = significance.compare_paired(before, [1.02 * b for b in before])
    assert small["p_value"] < significance.ALPHA and small["verdict"] == significance.NO_CHANGE
    same = significance.compare_paired(before, before)
    assert same["p_value"] == 1.0 and same["ratio"] == 1.0 and same["verdict"] == significance.NO_CHANGE
    # 10 rounds are the fewest that can reach p < 0.002
    assert significance.min_paired_p_value(10) < significance.ALPHA <= significance.min_paired_p_value(9)
    assert significance.compare_paired(before[:9], after[:9])["verdict"] == "too few samples (9 rounds)"
    with pytest.raises(ValueError, match="one sample a side per round"):
        significance.compare_paired(before, after[:9])
    with pytest.raises(ValueError, match="positive samples"):
        significance.compare_paired(before, [0.0, *after[1:]])


def test_interleaved_runs_are_judged_paired(tmp_path, capsys):
    from gsworkbench.bench.compare import interleaved_pair
    from gsworkbench.cli.main import main

    base, cand = paired_runs(tmp_path, 0.02, 0.024)
    for run, role in ((base, "baseline"), (cand, "candidate")):
        meta = json.loads((run / "metadata.json").read_text())
        meta["interleaved"] = {"id": "abc", "role": role}
        (run / "metadata.json").write_text(json.dumps(meta))
    cmp = compare_runs(base, cand)
    assert cmp.rule.startswith("Wilcoxon signed-rank (two-sided) on the per-round ratios") and "n=10" in cmp.rule
    assert set(cmp.table.verdict) == {"slower"} and (cmp.table.ratio > 1.1).all(), cmp.to_text()
    assert main(["compare", str(base), str(cand)]) == 1
    assert "test: Wilcoxon signed-rank" in capsys.readouterr().out
    # a run against itself, or two runs of different interleavings: the unpaired test
    assert compare_runs(base, base).rule.startswith("Mann-Whitney U")
    assert not interleaved_pair({"interleaved": {"id": "abc", "role": "baseline"}},
                                {"interleaved": {"id": "xyz", "role": "candidate"}})  # fmt: skip
    assert not interleaved_pair({}, {"interleaved": {"id": "abc", "role": "candidate"}})


def test_compare_command_names_the_rule(tmp_path, capsys):
    from gsworkbench.cli.main import main

    base, cand = paired_runs(tmp_path, 0.001, 0.0013)
    assert main(["compare", str(base), str(cand)]) == 1  # 30% slower: the gate fails
    out = capsys.readouterr().out
    assert "test: Mann-Whitney U (two-sided), p < 0.002, n=10," in out
    assert "slower" in out


def test_profile_diff_names_the_same_rule(tmp_path, capsys):
    """``profile diff`` judges the stages with the rule of ``compare`` (fixed repeats: 8 a side)."""
    from gsworkbench import profiling
    from gsworkbench.cli.main import main

    def workload(stage) -> None:  # noqa: ANN001
        with stage("a"):
            pass

    wl = profiling.callable_workload(workload, name="test:fixed", params={"n": 1})
    for side, slow in (("before", 1.0), ("after", 1.5)):
        profiling.profile(wl, out=tmp_path / side, pyspy_enabled=False, repeats=8, warmup=0, log=None)
        rows = []
        for r, x in enumerate(FIXED_BEFORE[:8]):
            rows += [{"repeat": r, "stage": "a", "seconds": 0.01 * slow * x},
                     {"repeat": r, "stage": "other", "seconds": 1e-4 * x},
                     {"repeat": r, "stage": "total (wall)", "seconds": 0.01 * slow * x + 1e-4 * x}]  # fmt: skip
        pd.DataFrame(rows).to_csv(tmp_path / side / "repeats.csv", index=False)
    d = profiling.diff(tmp_path / "before", tmp_path / "after", save=False)
    assert d.significant == ["a"] and d.rule.startswith("Mann-Whitney U (two-sided), p < 0.002, n=8,")
    row = d.stages.set_index("stage").loc["a"]
    assert row["verdict"] == "slower" and row["ratio"] == pytest.approx(1.5)
    assert d.stages.set_index("stage").loc["other", "verdict"] == "no significant change"
    assert main(["profile", "diff", str(tmp_path / "before"), str(tmp_path / "after"),
                 "--out", str(tmp_path / "diff")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "significance: Mann-Whitney U (two-sided), p < 0.002, n=8," in out and "significant changes: a" in out
    meta = json.loads((tmp_path / "diff" / "metadata.json").read_text())
    assert meta["criteria"]["alpha"] == 0.002 and meta["rule"] == d.rule


def test_profile_diff_with_too_few_repeats_says_how_many(tmp_path):
    from gsworkbench import profiling

    def workload(stage) -> None:  # noqa: ANN001
        with stage("a"):
            pass

    wl = profiling.callable_workload(workload, name="test:few", params={"n": 1})
    run = profiling.profile(wl, out=tmp_path / "r", pyspy_enabled=False, repeats=3, warmup=0, log=None)
    d = profiling.diff(run, run, save=False)
    assert set(d.stages.verdict) == {"too few samples (3 vs 3)"} and d.significant == []
    assert any("needs 7 repeats per profile (have 3 and 3" in w for w in d.warnings)


# ---- one timing loop for the runner and the revision worker --------------------------------------


class _ScriptedTimer:
    """A BlockTimer whose calls take ``seconds`` each and which logs what the loop asked of it."""

    def __init__(self, name: str, seconds: float, log: list) -> None:
        self.name, self.seconds, self.log = name, seconds, log

    def call(self) -> None:
        self.log.append((self.name, "call"))

    def time_block(self, number: int) -> float:
        self.log.append((self.name, number))
        return self.seconds


def test_time_blocks_warms_up_sizes_blocks_and_alternates():
    from gsworkbench.bench.runner import time_blocks

    log: list = []
    a, b = _ScriptedTimer("A", 0.001, log), _ScriptedTimer("B", 0.002, log)
    out = time_blocks([a, b], min_run_time=0.1, warmup=2, rounds=4, alternate=True)
    # warm-up: one timed call, one untimed, one timed (the block size's measure), per timer
    assert log[:6] == [("A", 1), ("A", "call"), ("A", 1), ("B", 1), ("B", "call"), ("B", 1)]
    # 4 rounds of 0.1/4 s each: 25 calls of A, 12 of B; ABBA order
    assert log[6:] == [("A", 25), ("B", 12), ("B", 12), ("A", 25), ("A", 25), ("B", 12), ("B", 12), ("A", 25)]
    assert [r["calls_per_run"] for r in out] == [25, 12] and [r["runs"] for r in out] == [4, 4]
    assert out[1]["median_s"] == 0.002 and out[0]["samples_s"] == [0.001] * 4
    log.clear()
    time_blocks([a, b], min_run_time=0.1, warmup=2, rounds=2)  # not alternating: A B, A B
    assert [x for x in log[6:]] == [("A", 50), ("B", 25), ("A", 50), ("B", 25)]


def test_revision_worker_has_no_timing_loop_of_its_own():
    """The worker answers the runner's loop step by step: it never sizes blocks or counts rounds."""
    from gsworkbench.bench import revisions

    source = revisions.WORKER.read_text()
    assert '"call"' in source and '"time"' in source
    assert "min_run_time" not in source and "rounds" not in source
