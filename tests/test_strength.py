"""Oracle strength: mutmut's mutants of the code, and which evidence kills each.

One bake, measured by `nox -s strength` on a slice of its code (the mutants of `put_order`,
so the suite stays fast; the whole example takes minutes), then by
scripts/strength.py in that session's environment on copies of the tree: one with a case
removed, one with a proposed case added. Storing the score and `strength_min` run the scripts'
`main(argv)` on prepared files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import _gate.verdict.verdict
import preconditions
import pytest
import strength
import yaml
from _gate.judge.lanes import Judge
from _gate.judge.runner import Ran
from _gate.plugin.confine import Reach
from _gate.runs.cases import load_cases
from _gate.runs.cassettes import record
from _gate.runs.git import SCORE_FILE
from _gate.runs.reuse import unsealed
from _gate.runs.sandbox import at_home, probe_sandbox, run_confined

from tests.helpers import SCRIPTS, finish
from tools.bakery import bake, edit, git

SLICE = ("--only", "src/shop/orders.py", "--mutants", "shop.orders.x_put_order__mutmut_*")
REMOVED = "put-conflicting-order-rejects"  # the only case that puts a conflicting order
Measured = tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]


def evidence(report: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(report.read_text("utf-8"))["evidence"]
    return found


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Measured:
    repo = bake(tmp_path_factory.mktemp("bake"))
    command = ["nox", "-s", "strength", "--", *SLICE, "--propose", "0"]
    proc = subprocess.run(command, cwd=repo, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return repo, proc, evidence(repo / "reports/strength.json")


def measure(repo: Path, tree: Path, out: Path, *argv: str) -> dict[str, Any]:
    """scripts/strength.py in the strength session's environment, on `tree`."""
    out.mkdir(parents=True, exist_ok=True)
    python = repo / ".nox/strength/bin/python"
    reports = ["--report", str(out / "s.json"), "--markdown", str(out / "s.md")]
    reports += ["--proposed", str(out / "proposed.yaml")]
    command = [str(python), str(repo / "scripts/strength.py"), "--tree", str(tree), *reports]
    proc = subprocess.run([*command, *argv], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return evidence(out / "s.json")


def copy_of(repo: Path, dest: Path) -> Path:
    ignore = shutil.ignore_patterns(".nox", ".git", "reports")
    return Path(shutil.copytree(repo, dest, ignore=ignore))


def without_case(tree: Path, case_id: str) -> None:
    path = tree / "oracle/cases.yaml"
    text = path.read_text("utf-8")
    start = text.index(f"  - id: {case_id}\n")
    end = text.index("  - id:", start + 1)
    path.write_text(text[:start] + text[end:], "utf-8")


@pytest.fixture(scope="module")
def minus(
    measured: Measured, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    """The tree without REMOVED, measured again, asking for proposed cases: by the cassettes
    alone, since the example's properties reach nothing in put_order."""
    repo = measured[0]
    tree = copy_of(repo, tmp_path_factory.mktemp("minus") / "tree")
    without_case(tree, REMOVED)
    out = tmp_path_factory.mktemp("minus-reports")
    return tree, measure(repo, tree, out, *SLICE, "--kinds", "cassettes", "--propose", "10")


def missed(report: dict[str, Any]) -> set[str]:
    return {row["mutant"] for row in report["missed"]}


def test_strength_session_prints_the_score_and_the_mutants_the_oracle_misses(
    measured: Measured,
) -> None:
    repo, proc, report = measured
    totals = report["totals"]
    verdicts = ("oracle", "only_tests", "survived", "not_judged")
    assert totals["mutants"] == sum(totals.get(v, 0) for v in verdicts) > 0
    assert report["kinds"] == ["cassettes", "properties", "tests"]
    assert report["score"] == round(totals["oracle"] / totals["mutants"], 4)
    said = f"strength: pass: measured: {report['score']:.1%} of {totals['mutants']} mutants killed"
    assert said in proc.stdout + proc.stderr
    assert report["missed"], "some mutants of put_order survive the example's oracle"
    source = (repo / "src/shop/orders.py").read_text("utf-8").splitlines()
    markdown = (repo / "reports/strength.md").read_text("utf-8")
    for row in report["missed"]:
        # Each survivor points at the line of the source it mutates, and shows the mutation.
        assert source[row["line"] - 1].strip() == row["was"], row
        assert row["code"] != row["was"]
        assert f"`{row['file']}:{row['line']}` `{row['function']}`: `{row['code']}`" in markdown
    first = report["missed"][0]
    shown = f"missed {first['file']}:{first['line']} {first['function']}: {first['code']}"
    assert shown in proc.stdout


def test_the_tests_run_on_the_mutants_the_oracle_missed_and_tell_the_same(
    measured: Measured, tmp_path: Path
) -> None:
    """The project's tests count only where the cassettes and the properties missed: run on
    those alone, they make the verdicts they make when run on every mutant."""
    repo = measured[0]
    # _read_cart: mutants the cassettes kill, mutants only the tests kill, and survivors.
    cart = ("--only", "src/shop/cli.py", "--mutants", "shop.cli.x__read_cart__mutmut_*")
    report = measure(repo, repo, tmp_path / "all", *cart, "--propose", "0")
    alone = measure(repo, repo, tmp_path / "tests", *cart, "--kinds", "tests", "--propose", "0")

    def only_tests(found: dict[str, Any]) -> set[str]:
        return {row["mutant"] for row in found["missed"] if row["verdict"] == "only_tests"}

    assert only_tests(report), "some mutant of _read_cart is killed by the project's tests alone"
    assert report["totals"]["cassettes"] > 0
    assert report["totals"].get("survived", 0) > 0
    assert only_tests(report) == only_tests(alone) & missed(report)


def test_the_cassettes_run_on_the_mutants_the_properties_missed_and_tell_the_same(
    measured: Measured, tmp_path: Path
) -> None:
    """The properties run first and the cassettes on the mutants they did not kill: the oracle
    misses what each kind, run alone on every mutant, misses; the properties' column is theirs
    alone, the cassettes' the kills the properties missed."""
    repo = measured[0]
    # load_cart: mutants both kinds kill, each alone, and neither.
    cart = ("--only", "src/shop/orders.py", "--mutants", "shop.orders.x_load_cart__mutmut_*")
    both = ("properties", "cassettes")
    report = measure(repo, repo, tmp_path / "both", *cart, "--kinds", *both, "--propose", "0")
    alone = {
        kind: measure(repo, repo, tmp_path / kind, *cart, "--kinds", kind, "--propose", "0")
        for kind in both
    }
    by_properties, by_cassettes = (a["totals"].get(kind, 0) for kind, a in alone.items())
    assert report["totals"]["properties"] == by_properties > 0
    # Some of the cassettes' kills the properties made first: those the cassettes never ran.
    assert 0 < report["totals"]["cassettes"] < by_cassettes
    assert missed(report) == missed(alone["properties"]) & missed(alone["cassettes"])
    assert report["totals"]["cassettes"] == len(
        missed(alone["properties"]) - missed(alone["cassettes"])
    )


def test_removing_a_case_drops_the_score_and_names_the_mutants_it_killed(
    measured: Measured, minus: tuple[Path, dict[str, Any]]
) -> None:
    before, after = measured[2], minus[1]
    assert after["score"] < before["score"]
    now_missed = missed(after) - missed(before)
    assert now_missed, "the removed case was the only one to kill some mutant"
    assert missed(before) <= missed(after)
    assert after["totals"]["mutants"] == before["totals"]["mutants"]


def test_a_proposed_case_once_added_kills_its_mutant(
    measured: Measured, minus: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    repo, (tree, report) = measured[0], minus
    proposals = report["proposals"]
    assert proposals, "a case that tells some missed mutant apart"
    proposed = proposals[0]
    target = proposed["kills"][0]["mutant"]
    assert target in missed(report)
    case = {k: v for k, v in proposed.items() if k not in ("from", "kills")}
    cases = tree / "oracle/cases.yaml"
    data = yaml.safe_load(cases.read_text("utf-8"))
    cases.write_text(yaml.safe_dump({"cases": [*data["cases"], case]}), "utf-8")
    again = measure(repo, tree, tmp_path, *SLICE[:2], "--mutants", target, "--kinds", "cassettes")
    assert again["totals"] == {"mutants": 1, "oracle": 1, "cassettes": 1}
    assert again["missed"] == []


def full_report(path: Path, score: float, partial: bool) -> Path:
    """A strength report as a whole run writes one: the input --store takes."""
    totals = {"mutants": 200, "oracle": int(score * 200)}
    found = {"score": score, "totals": totals, "kinds": ["cassettes"], "partial": partial}
    step = {"step": "strength", "status": "pass", "exit_code": 0, "summary": f"score {score}"}
    path.write_text(json.dumps({**step, "evidence": {**found, "base": "0" * 40}}), "utf-8")
    return path


def store(tree: Path, report: Path, out: Path) -> tuple[int, str]:
    argv = ["--tree", str(tree), "--store", str(report), "--report", str(out)]
    return strength.main(argv), json.loads(out.read_text("utf-8"))["summary"]


def test_a_partial_measurement_is_never_stored_as_the_score(tmp_path: Path) -> None:
    repo = bake(tmp_path / "bake")
    before = git(repo, "rev-parse", "oracle/main")
    report = full_report(tmp_path / "partial.json", 0.5, partial=True)
    code, summary = store(repo, report, tmp_path / "out.json")
    assert code == 2
    assert summary.startswith("a partial measurement (--only, --mutants or --kinds)")
    assert git(repo, "rev-parse", "oracle/main") == before


@pytest.mark.parametrize(("score", "minimum", "code"), [(0.5, 0.9, 2), (0.95, 0.9, 0), (0.5, 0, 0)])
def test_strength_min_fails_closed_below_the_stored_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, score: float, minimum: float, code: int
) -> None:
    monkeypatch.setenv("JUDGE_OFFLINE", "1")
    repo = bake(tmp_path / "bake")
    stored, _ = store(repo, full_report(tmp_path / "full.json", score, False), tmp_path / "s.json")
    assert stored == 0
    on_ref = tmp_path / SCORE_FILE
    on_ref.write_text(git(repo, "show", f"oracle/main:{SCORE_FILE}"), "utf-8")
    edit(repo / "oracle/judge.yaml", "strength_min: 0\n", f"strength_min: {minimum}\n")
    out = tmp_path / "preconditions.json"
    argv = ["--tree", str(repo), "--strength", str(on_ref), "--report", str(out)]
    assert preconditions.main(argv) == code
    result = json.loads(out.read_text("utf-8"))
    assert result["evidence"]["strength"]["score"] == score
    if code:
        assert f"kills {score:.1%} of mutants" in result["summary"]
        assert f"below strength_min {minimum:.0%}" in result["summary"]
    # The judge's summary shows the score with its date, from the preconditions' report.
    step = finish(Judge(repo=tmp_path, reports=tmp_path), "preconditions", Ran(code, b"", [], 0))
    report = {"base": "a" * 40, "head": "b" * 40, "verdict": "x", "exit_code": 0, "steps": [step]}
    summary = _gate.verdict.verdict.summary_markdown(report, "")
    today = dt.date.today().isoformat()
    assert f"Oracle strength: **{score:.1%}** of 200 mutants killed (measured {today}" in summary


def test_strength_min_without_a_score_fails_closed_naming_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_OFFLINE", "1")
    repo = bake(tmp_path / "bake")
    edit(repo / "oracle/judge.yaml", "strength_min: 0\n", "strength_min: 0.8\n")
    empty = tmp_path / SCORE_FILE
    empty.write_text("", "utf-8")  # the judge writes what the ref holds: nothing
    out = tmp_path / "preconditions.json"
    argv = ["--tree", str(repo), "--strength", str(empty), "--report", str(out)]
    assert preconditions.main(argv) == 2
    summary = json.loads(out.read_text("utf-8"))["summary"]
    assert "no strength score, and judge.yaml sets strength_min 80%" in summary
    assert "nox -s strength -- --update-ref" in summary


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("strength_paths: [src]", "strength_paths: [lib]"), "strength_paths names 'lib'"),
        (("strength_min: 0\n", "strength_min: 90\n"), "'strength_min' is a share of mutants"),
    ],
    ids=["a-path-not-in-the-tree", "a-minimum-over-one"],
)
def test_bad_strength_settings_fail_closed_in_one_line(
    tmp_path: Path, change: tuple[str, str], said: str
) -> None:
    repo = bake(tmp_path / "bake")
    edit(repo / "oracle/judge.yaml", *change)
    out = tmp_path / "strength.json"
    assert strength.main(["--tree", str(repo), "--report", str(out)]) == 2
    summary = json.loads(out.read_text("utf-8"))["summary"]
    assert said in summary
    assert "\n" not in summary


def test_shards_split_the_mutants_and_merge_into_the_whole_measurement(
    measured: Measured, tmp_path: Path
) -> None:
    repo = measured[0]
    # cli.py's mutants against the properties, which reach none of them: the cheapest run
    # that still has mutants, functions and survivors to split.
    narrow = ("--only", "src/shop/cli.py", "--kinds", "properties", "--propose", "0")
    whole = measure(repo, repo, tmp_path / "whole", *narrow)
    shards = [tmp_path / f"shard-{i}" for i in (1, 2)]
    parts = [
        measure(repo, repo, out, *narrow, "--shard", f"{i}/2") for i, out in enumerate(shards, 1)
    ]
    assert all(part["totals"]["mutants"] for part in parts), "each shard owns some functions"
    assert sum(part["totals"]["mutants"] for part in parts) == whole["totals"]["mutants"]
    out = tmp_path / "merged.json"
    argv = ["--merge", *(str(d / "s.json") for d in shards), "--report", str(out)]
    argv += ["--markdown", str(tmp_path / "m.md"), "--proposed", str(tmp_path / "p.yaml")]
    assert strength.main(argv) == 0
    merged = evidence(out)
    assert merged["totals"] == whole["totals"]
    assert missed(merged) == missed(whole)
    # One shard alone is not the measurement: its merge fails closed, naming the shards.
    argv = ["--merge", str(shards[0] / "s.json"), "--report", str(out)]
    assert strength.main(argv) == 2
    assert "the shards ['1/2'] are not 1..N" in json.loads(out.read_text("utf-8"))["summary"]


# --- the cassette tests fork each case from mutmut's worker (_gate/strength/strength_cassettes.py)

# A package as mutmut leaves it: each function picks its mutant by $MUTANT_UNDER_TEST when
# called. style() is called at import time and reads the case's environment; --where answers
# with what started the process, which a fork of pytest does not share with a new interpreter;
# --reach is the patch's code reaching for the judge that started it: its process, its files.
TALLY = """
import os, sys
def style():
    if os.environ.get("MUTANT_UNDER_TEST") == "tally.x_style__mutmut_1":
        return "quiet"
    return os.environ.get("STYLE", "plain")
STYLE = style()
def reach():
    try:
        os.kill(int(os.environ["JUDGE_PID"]), 0)
        print("judge seen")
    except OSError:
        print("judge hidden")
    try:
        open(os.path.join(os.environ["JUDGE_DIR"], "reached"), "w").close()
        print("judge's folder written")
    except OSError:
        print("judge's folder refused")
def main():
    if sys.argv[1:] == ["--where"]:
        print(os.path.basename(sys.modules["__main__"].__file__))
    elif sys.argv[1:] == ["--reach"]:
        reach()
    else:
        print("style:", STYLE)
"""
# The worker imported the package unmutated before a mutant was picked, as mutmut's own
# coverage pass leaves it.
WORKER = """
import os
mutant = os.environ.pop("MUTANT_UNDER_TEST")
import tally
os.environ["MUTANT_UNDER_TEST"] = mutant
"""
TALLY_CASES = """
cases:
  - {id: styled, argv: [], env: {STYLE: loud}, compare: [exit_code, stdout.raw]}
  - {id: where, argv: ["--where"], compare: [exit_code, stdout.raw]}
  - id: reach
    argv: ["--reach"]
    env: {JUDGE_PID: "@pid@", JUDGE_DIR: "@dir@"}
    compare: [exit_code, stdout.raw]
"""
HIDDEN = "judge hidden\njudge's folder refused\n"


@pytest.fixture
def tally(tmp_path: Path) -> dict[str, Path]:
    """The package mutated, its console script, its cases recorded out of process as
    strength.py records them (the judge here is this test's process, and a folder of its
    own), and a copy of the gate's scripts with the worker's imports."""
    mutated = tmp_path / "mutants"
    (mutated / "tally").mkdir(parents=True)
    (mutated / "tally/__init__.py").write_text(TALLY, "utf-8")
    info = mutated / "tally-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tally\nVersion: 1.0\n", "utf-8")
    (info / "entry_points.txt").write_text("[console_scripts]\ntally = tally:main\n", "utf-8")
    command = tmp_path / "bin/tally"
    command.parent.mkdir()
    command.write_text(f"#!{sys.executable}\nimport sys, tally\nsys.exit(tally.main())\n")
    command.chmod(0o755)
    judge_dir = tmp_path / "judge"
    judge_dir.mkdir()
    cases = tmp_path / "cases.yaml"
    text = TALLY_CASES.replace("@pid@", str(os.getpid())).replace("@dir@", str(judge_dir))
    cases.write_text(text, "utf-8")
    scripts = Path(shutil.copytree(SCRIPTS, tmp_path / "scripts"))
    (scripts / "_gate/strength/conftest.py").write_text(WORKER, "utf-8")
    expected = {}
    for case in load_cases(cases):
        env = (*case.env, ("PYTHONPATH", str(mutated)))
        recorded = record(command, [dataclasses.replace(case, env=env)], tmp_path, "")
        expected[case.id] = recorded["cases"][case.id]["fields"]
    found: dict[str, Any] = {"command": str(command), "command_name": "tally"}
    found |= {"cases": str(cases), "fixtures": str(tmp_path), "expected": expected}
    # As strength.py writes it: the level its mutmut runs are confined at, or none.
    recordings = {}
    for name, level in (("confined", probe_sandbox().level), ("by-hand", "")):
        recordings[name] = tmp_path / f"recording-{name}.json"
        recordings[name].write_text(json.dumps({**found, "confined": level}), "utf-8")
    return {"mutated": mutated, "scripts": scripts, "judge": judge_dir, **recordings}


def cassette_tests(
    tally: dict[str, Path],
    mutant: str,
    scratch: Path,
    confined: bool = True,
    options: tuple[str, ...] = (),
) -> dict[str, str]:
    """The cassette tests under `mutant` as mutmut's worker runs them (with pytest's
    `options`): confined by the launcher, as strength.py starts mutmut, or by hand; each test's
    outcome, and how each case ran (`fork` or `process`) as the run's TMPDIR keeps it."""
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant, "TMPDIR": str(scratch)}
    paths = os.pathsep.join(str(path) for path in (tally["mutated"], tally["scripts"]))
    env.update(PYTHONPATH=paths, PYTHONDONTWRITEBYTECODE="1")
    recording = tally["confined" if confined else "by-hand"]
    env.update(ORACLE_STRENGTH_RECORDING=str(recording))
    env.update(ORACLE_STRENGTH_MUTATED=str(tally["mutated"]))
    test = tally["scripts"] / "_gate/strength/strength_cassettes.py"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *options, str(test)]
    if confined:  # what the recording names, seen as strength.py's mutmut runs see it
        reach = Reach(see=(str(recording.parent),))
        done = run_confined(
            cmd,
            writable=[scratch],
            timeout=300,
            cwd=scratch,
            env=at_home(env, scratch),
            reach=reach,
        )
        out = done.stdout.head.decode("utf-8", "replace")
    else:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False).stdout
    found = {}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED") and "[" in rest:
            found[rest.split("[")[1].split("]")[0]] = word
    for mark in (scratch / "oracle-forked").glob("[!.]*.json"):
        found[mark.stem] = "fork" if (unsealed(mark.read_bytes()) or {})["fork"] else "process"
    return found


def test_a_cassette_test_forks_its_case_and_runs_it_as_a_new_process_would(
    tally: dict[str, Path], tmp_path: Path
) -> None:
    styled, where, reach = (hashlib.sha256(n.encode()).hexdigest() for n in TALLY_IDS)
    unmutated = cassette_tests(tally, "", tmp_path / "unmutated")
    # The fork imports the package afresh in the case's environment: it answers as recorded.
    # Where it cannot (what started the process differs), the case runs out of process.
    outcomes = {name: "PASSED" for name in TALLY_IDS}
    assert unmutated == {**outcomes, styled: "fork", where: "process", reach: "fork"}
    # A mutant of code that runs at import time is seen in the fork: killed.
    mutant = cassette_tests(tally, "tally.x_style__mutmut_1", tmp_path / "mutant")
    assert (mutant["styled"], mutant["where"], mutant[styled]) == ("FAILED", "PASSED", "fork")


TALLY_IDS = ("styled", "where", "reach")


def test_a_forked_case_cannot_reach_the_judge_and_none_forks_outside_the_launcher(
    tally: dict[str, Path], tmp_path: Path
) -> None:
    """The patch's code in a forked case runs in the confinement of the mutmut run the
    launcher started: it neither sees the judge's process nor writes the judge's folder, and
    answers as its confined recording did (a fork that reached further would not). Run by
    hand, with no confinement recorded, no case forks: each runs out of process through the
    launcher."""
    recorded = json.loads(tally["confined"].read_text("utf-8"))["expected"]["reach"]
    assert recorded == {"exit_code": 0, "stdout.raw": HIDDEN}
    forked = cassette_tests(tally, "", tmp_path / "forked")
    assert forked["reach"] == "PASSED"
    assert forked[hashlib.sha256(b"reach").hexdigest()] == "fork"
    by_hand = cassette_tests(tally, "", tmp_path / "by-hand", confined=False)
    assert by_hand == {name: "PASSED" for name in TALLY_IDS}  # and no case forked
    assert list(tally["judge"].iterdir()) == []


def test_a_mutant_runs_first_the_cases_that_killed_its_function_before(
    tally: dict[str, Path], tmp_path: Path
) -> None:
    """mutmut stops a mutant at its first failing test (`-x`); the strength plugin runs first
    the cases that killed a mutant of the same function earlier in the run (one TMPDIR)."""
    mutmut = ("-x", "-p", "_gate.strength.strength_plugin")
    scratch = tmp_path / "run"
    first = cassette_tests(tally, "tally.x_style__mutmut_1", scratch, options=mutmut)
    assert (first["reach"], first["styled"]) == ("PASSED", "FAILED")  # in mutmut's order
    assert "where" not in first  # -x: not run
    again = cassette_tests(tally, "tally.x_style__mutmut_1", scratch, options=mutmut)
    assert again["styled"] == "FAILED"
    assert "reach" not in again
    assert "where" not in again
    # Another function's mutant, which no case kills: every case runs, first the one that
    # killed a mutant of any function (pytest's summary lists them in the order they ran).
    other = cassette_tests(tally, "tally.x_main__mutmut_1", scratch, options=mutmut)
    assert list(other)[:3] == ["styled", "reach", "where"]
    assert set(other.values()) >= {"PASSED"}
    assert "FAILED" not in other.values()


PROPERTY = """
from pathlib import Path
from hypothesis import given, settings, strategies as st

CALLS = Path(__file__).with_name("calls")


@settings(max_examples=200, derandomize=True, database=None)
@given(st.lists(st.integers()))
def test_short_lists(values):
    with CALLS.open("a") as calls:
        calls.write(".")
    assert sum(abs(value) for value in values) < 1000
"""


def test_a_failing_property_fails_as_before_without_shrinking_under_the_strength_plugin(
    tmp_path: Path,
) -> None:
    """A mutant is killed or not by a property's first failing example: under the plugin the
    property fails as it does without it, having run fewer examples (no shrinking)."""
    test = tmp_path / "test_property.py"
    test.write_text(PROPERTY, "utf-8")
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS)}

    def examples(*plugin: str) -> int:
        (tmp_path / "calls").unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, str(test)]
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "1 failed" in proc.stdout, proc.stdout + proc.stderr
        return len((tmp_path / "calls").read_text("utf-8"))

    assert examples("-p", "_gate.strength.strength_plugin") < examples()
