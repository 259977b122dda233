"""A new user's first hour, on real bakes and real nox sessions: each dead end a user met once
(issue 25) is a test here, and the README's six steps from a bare bake to a first merge run as
written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import SCRIPTS
from tools.bakery import OFFLINE, bake, branch, edit, git

pytestmark = pytest.mark.e2e


def nox(
    repo: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nox", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **OFFLINE, **(env or {})},
        check=False,
    )


def last_line(proc: subprocess.CompletedProcess[str], prefix: str) -> str:
    """The last line the gate printed that starts with `prefix` (nox adds its own after it)."""
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith(prefix)]
    assert said, proc.stdout + proc.stderr
    return said[-1]


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare bake whose first case, its CLI's --help, is committed: a gate that can judge."""
    repo = bake(tmp_path_factory.mktemp("gated"), include_example="no")
    case = nox(repo, "-s", "case", "--", "--", "--help")
    assert case.returncode == 0, case.stdout + case.stderr
    git(repo, "commit", "-qam", "first case")
    return repo


STEPS = "## From a bake to a first merge in 6 steps"


def readme_steps(repo: Path) -> tuple[list[int], list[str]]:
    """The numbers of the README's steps and its shell blocks after the first (the bake)."""
    section = (repo / "README.md").read_text("utf-8").split(STEPS, 1)[1].split("\n## ", 1)[0]
    numbers = [int(n) for n in re.findall(r"\*\*(\d+)\.", section)]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    return numbers, blocks[1:]


@pytest.mark.parametrize("example", ["no", "yes"])
def test_the_readme_s_six_steps_reach_a_first_merge_as_written(
    tmp_path: Path, example: str
) -> None:
    repo = bake(tmp_path, include_example=example)
    numbers, blocks = readme_steps(repo)
    assert numbers == [1, 2, 3, 4, 5, 6]
    output = ""
    for block in blocks:  # steps 2 to 6, each as a user pastes it
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=repo,
            capture_output=True,
            text=True,
            env={**os.environ, **OFFLINE},
            check=False,
        )
        output += proc.stdout + proc.stderr
        assert proc.returncode == 0, output
    verdict = [line for line in output.splitlines() if line.startswith("judge: verdict")]
    assert verdict and verdict[-1].startswith("judge: verdict merge (exit 0)"), output
    assert verdict[-1].endswith("reports/judge-summary.md")  # the readable report, not JSON
    assert git(repo, "rev-parse", "HEAD") == git(repo, "rev-parse", "agent/first-change")


# An honest change a first user makes: an optional flag, which grows --help without removing a
# word of it, so the stub's `--help` case (stdout.additive) holds.
STUB = '    return argparse.ArgumentParser(prog=PROG, description="Replace with your commands.")\n'
FLAG = """    parser = argparse.ArgumentParser(prog=PROG, description="Replace with your commands.")
    parser.add_argument("--name", default="world", help="whom to greet")
    return parser
"""


def test_an_optional_flag_grows_help_and_merges(gated: Path) -> None:
    assert "stdout.additive" in (gated / "oracle/cases.yaml").read_text()
    branch(gated, "greet", lambda repo: edit(repo / "src/shop/cli.py", STUB, FLAG))
    judged = nox(gated, "-s", "judge", "--", "--head", "greet")
    assert judged.returncode == 0, said(judged)
    summary = (gated / "reports/judge-summary.md").read_text()
    assert "--name" in summary  # the added help line is shown


def test_the_stub_cli_answers_help_and_rejects_what_it_does_not_know(gated: Path) -> None:
    python = [sys.executable, "-c", "import sys; from shop.cli import main; sys.exit(main())"]
    env = {**os.environ, "PYTHONPATH": str(gated / "src")}
    shown = subprocess.run([*python, "--help"], capture_output=True, text=True, env=env)
    wrong = subprocess.run([*python, "--frobnicate"], capture_output=True, text=True, env=env)
    assert (shown.returncode, shown.stdout.splitlines()[0]) == (0, "usage: shop [-h]")
    assert wrong.returncode == 2 and "unrecognized arguments: --frobnicate" in wrong.stderr


def said(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def test_tool_sessions_end_with_their_own_exit_codes(gated: Path) -> None:
    # The id of the committed case again: a fail-closed 2 (nox alone would say 1).
    again = nox(gated, "-s", "case", "--", "--id", case_ids(gated)[0], "--", "--help")
    # A usage error of the CLI looks wrong: without --yes and a terminal it is not saved (1).
    unsure = nox(gated, "-s", "case", "--", "--", "--frobnicate")
    row = ("--field", "stdout.raw", "--reason", "r", "--reviewer", "@shop-example/maintainers")
    allow = nox(gated, "-s", "allow", "--", "--id", "no-such-case", *row)
    (gated / "fixtures/elsewhere").symlink_to("/etc/hostname")
    try:
        lock = nox(gated, "-s", "lock")  # a symlink under fixtures/ is refused
    finally:
        (gated / "fixtures/elsewhere").unlink()
    assert again.returncode == 2 and "already in use" in said(again), said(again)
    assert unsure.returncode == 1 and "not saved" in said(unsure), said(unsure)
    assert allow.returncode == 2 and "no-such-case" in said(allow), said(allow)
    assert lock.returncode == 2 and "symlink" in said(lock), said(lock)
    assert git(gated, "status", "--porcelain") == ""


def case_ids(repo: Path) -> list[str]:
    cases = yaml.safe_load((repo / "oracle/cases.yaml").read_text())["cases"]
    return [str(case["id"]) for case in cases]


def test_help_never_waits_for_the_wheelhouse(gated: Path, tmp_path: Path) -> None:
    empty = tmp_path / "no-wheelhouse"
    for session in ("case", "record", "allow", "judge"):
        proc = nox(gated, "-s", session, "--", "--help", env={"ORACLE_WHEELHOUSE": str(empty)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "usage:" in proc.stdout, session
        assert not empty.exists(), f"{session} --help filled the wheelhouse"


def test_the_wheelhouse_says_what_it_downloads(tmp_path: Path, wheelhouse: Path) -> None:
    # Offline, from the suite's own wheelhouse as the index: pip downloads for real.
    dest = tmp_path / "fresh"
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}
    cmd = [sys.executable, str(SCRIPTS / "wheelhouse.py"), "--dest", str(dest)]
    cmd += ["--report", str(tmp_path / "report.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=SCRIPTS.parent)
    assert proc.returncode == 0, proc.stderr
    pins = sum(
        1
        for line in (SCRIPTS / "requirements-judge.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert proc.stderr.splitlines()[0] == (
        f"wheelhouse: downloading {pins} pinned packages into {dest} (once)"
    )


def test_record_refuses_uncommitted_cases_and_names_the_file(gated: Path) -> None:
    cases = gated / "oracle/cases.yaml"
    cases.write_text(cases.read_text() + "# a case to come\n")
    try:
        proc = nox(gated, "-s", "record")
    finally:
        git(gated, "checkout", "--", "oracle/cases.yaml")
    line = last_line(proc, "record:")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "oracle/cases.yaml: uncommitted changes" in line and "commit them first" in line


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("oracle/cases.yaml", "cases: [\n"),  # malformed YAML
        ("oracle/judge.yaml", "base_brnch: main\n"),  # a typo of a field
    ],
)
def test_the_judge_reads_committed_gate_files_and_names_edited_ones(
    gated: Path, path: str, text: str
) -> None:
    target = gated / path
    target.write_text(target.read_text() + text)
    try:
        judged = nox(gated, "-s", "judge")
    finally:
        git(gated, "checkout", "--", path)
    output = said(judged)
    assert f"judge: note: not judged, uncommitted here: {path};" in output
    # Judged as committed: HEAD against itself, its one case as committed.
    assert judged.returncode == 0 and "judge: verdict merge (exit 0)" in output, output
    assert "base_brnch" not in output and "malformed" not in output


def test_sessions_on_a_repository_without_the_gate_say_so(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    (plain / "README.md").write_text("# plain\n")
    git(plain, "add", "README.md")
    git(plain, "commit", "-qm", "plain")
    for script, *args in (("record_cassettes.py",), ("add_case.py", "--", "--help")):
        cmd = [sys.executable, str(SCRIPTS / script), "--repo", str(plain), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=plain)
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert len(lines) == 1 and "oracle/judge.yaml: not committed on HEAD" in lines[0], lines
        assert "this branch has no oracle gate" in lines[0]
        assert "Traceback" not in proc.stderr


def test_a_shallow_clone_names_the_fetch_that_brings_the_oracle_ref(
    gated: Path, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{gated}", str(clone))
    missing = nox(clone, "-s", "judge")
    fetch = "git fetch origin oracle/main:refs/remotes/origin/oracle/main"
    line = last_line(missing, "judge: setup:")
    assert missing.returncode == 2
    assert "this clone is shallow" in line and f"run `{fetch}`" in line
    assert "judge: build:" not in missing.stdout  # it fails before any step, not after all
    git(clone, *fetch.split()[1:])
    fetched = nox(clone, "-s", "judge")
    assert "oracle ref" not in fetched.stdout + fetched.stderr
