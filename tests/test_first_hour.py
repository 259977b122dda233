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

from tests.helpers import ADOPTER, PYPROJECT, SCRIPTS, TALLY, TALLY_TEST, committed
from tools.bakery import OFFLINE, TEMPLATE, bake, branch, edit, git

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
    assert verdict, output
    assert verdict[-1].startswith("judge: verdict merge (exit 0)"), output
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
    assert wrong.returncode == 2
    assert "unrecognized arguments: --frobnicate" in wrong.stderr


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
    assert again.returncode == 2, said(again)
    assert "already in use" in said(again), said(again)
    assert unsure.returncode == 1, said(unsure)
    assert "not saved" in said(unsure), said(unsure)
    assert allow.returncode == 2, said(allow)
    assert "no-such-case" in said(allow), said(allow)
    assert lock.returncode == 2, said(lock)
    assert "symlink" in said(lock), said(lock)
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
    assert "oracle/cases.yaml: uncommitted changes" in line
    assert "commit them first" in line


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
    assert judged.returncode == 0, output
    assert "judge: verdict merge (exit 0)" in output, output
    assert "base_brnch" not in output
    assert "malformed" not in output


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
        assert len(lines) == 1, lines
        assert "oracle/judge.yaml: not committed on HEAD" in lines[0], lines
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
    assert "this clone is shallow" in line
    assert f"run `{fetch}`" in line
    assert "judge: build:" not in missing.stdout  # it fails before any step, not after all
    git(clone, *fetch.split()[1:])
    fetched = nox(clone, "-s", "judge")
    assert "oracle ref" not in fetched.stdout + fetched.stderr


def listed_sessions(repo: Path) -> list[str]:
    """Every session `nox -l` lists (`* judge -> ...` selected, `- case -> ...` not)."""
    listed = nox(repo, "-l")
    assert listed.returncode == 0, said(listed)
    return re.findall(r"^[*-] (\S+) -> ", listed.stdout, flags=re.MULTILINE)


def test_every_session_answers_help_at_once_and_installs_nothing(tmp_path: Path) -> None:
    repo = bake(tmp_path)
    sessions = listed_sessions(repo)
    assert {"judge", "tests", "strength", "wheelhouse", "oracle"} <= set(sessions), sessions
    empty = tmp_path / "no-wheelhouse"
    for session in sessions:
        proc = nox(repo, "-s", session, "--", "--help", env={"ORACLE_WHEELHOUSE": str(empty)})
        assert proc.returncode == 0, f"{session}: {said(proc)}"
        assert re.search(r"^usage: ", proc.stdout, flags=re.MULTILINE), f"{session}: {said(proc)}"
        assert "Traceback" not in said(proc), session
    # No environment made (nox's folder), no wheelhouse filled, no report written.
    assert not (repo / ".nox").exists()
    assert not empty.exists()
    assert not (repo / "reports").exists()
    assert git(repo, "status", "--porcelain") == ""


NOX_OWN = ("nox > Running session", "nox > Creating virtual environment")


def test_a_judge_outside_git_says_so_first_and_downloads_nothing(tmp_path: Path) -> None:
    repo = bake(tmp_path / "bake")
    plain = tmp_path / "plain"  # the project's files without their repository
    plain.mkdir()
    archive = tmp_path / "project.tar"
    git(repo, "archive", f"--output={archive}", "HEAD")
    subprocess.run(["tar", "-xf", str(archive), "-C", str(plain)], check=True)
    empty = tmp_path / "no-wheelhouse"
    # No folder above the copy may count as its repository.
    env = {"ORACLE_WHEELHOUSE": str(empty), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    judged = nox(plain, "-s", "judge", env=env)
    lines = [line for line in said(judged).splitlines() if not line.startswith(NOX_OWN)]
    assert judged.returncode == 2, said(judged)
    assert lines, said(judged)
    assert lines[0].startswith("nox > judge: error (exit 2): "), said(judged)
    assert f"{plain} is not in a git repository" in lines[0], said(judged)
    assert "run it in a clone of the project" in lines[0]
    assert not empty.exists()  # nothing downloaded before it said so
    assert "install" not in said(judged)


def test_the_tests_session_echoes_no_program_and_shows_failures(gated: Path) -> None:
    ran = nox(gated, "-s", "tests")
    assert ran.returncode == 0, said(ran)
    assert "python -c" not in said(ran)
    assert "tests: python -m pytest -q tests" in ran.stdout  # what it runs, in one line
    config = gated / "oracle/judge.yaml"
    config.write_text(config.read_text() + "base_brnch: main\n")
    try:
        broken = nox(gated, "-s", "tests")
    finally:
        git(gated, "checkout", "--", "oracle/judge.yaml")
    assert broken.returncode != 0
    assert "python -c" not in said(broken)
    assert "base_brnch" in said(broken)  # the failure is shown, naming the field


# --- issue 49: each message says what to do next --------------------------------------------


def test_a_stale_fixture_lock_names_the_base_commit_and_the_rebase(tmp_path: Path) -> None:
    """`nox -s lock` and a commit on the base, then the same branch judged again: its merge
    base is the older commit, and the message says so, with the rebase that takes the fix."""
    repo = bake(tmp_path)
    (repo / "fixtures/note.txt").write_text("one\n")
    git(repo, "add", "fixtures/note.txt")
    git(repo, "commit", "-qm", "a fixture, not locked")
    stale = git(repo, "rev-parse", "HEAD").strip()
    branch(repo, "agent/x", lambda tree: (tree / "NOTES.md").write_text("x\n"))
    lock = nox(repo, "-s", "lock")
    assert lock.returncode == 0, lock.stdout + lock.stderr
    git(repo, "commit", "-qam", "lock the fixture")
    verdict = nox(repo, "-s", "judge", "--", "--head", "agent/x")
    line = last_line(verdict, "judge: fixtures-lock: ")
    assert f"the base commit {stale[:12]}: its fixtures do not match" in line, line
    assert "`git rebase main`" in line, line
    assert "merge base, not the branch's tip" in line, line


def test_validation_names_every_bad_field_its_type_and_a_close_match(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPTS))
    from _gate.core.config import load_config
    from _gate.core.protocol import FailClosed
    from _gate.runs.cases import load_cases

    cases = tmp_path / "cases.yaml"
    bad = [
        {"id": "a", "argv": ["x"], "compare": ["exit_code"], "timeout": "ten"},
        {"id": "b", "argv": "x", "compare": ["exit_code"], "stdn": ""},
    ]
    cases.write_text(yaml.safe_dump({"cases": bad}))
    with pytest.raises(FailClosed) as caught:
        load_cases(cases)
    said = str(caught.value)
    assert "case 'a': field 'timeout' must be a number of seconds above 0, not 'ten'" in said
    assert "case 'b': unknown field 'stdn'; did you mean 'stdin'?" in said
    config = tmp_path / "judge.yaml"
    settings = "command: x\nbase_branch: main\noracle_ref: oracle/main\nprotected: []\n"
    config.write_text(settings + "crosrun: block\ncrossrun_timeout: ten\ntests: tests\n")
    with pytest.raises(FailClosed) as caught:
        load_config(config)
    said = str(caught.value)
    assert "unknown field 'crosrun'; did you mean 'crossrun'?" in said
    assert "field 'crossrun_timeout' must be a number, not 'ten'" in said
    assert "field 'tests' must be a list of strings, not 'tests'" in said
    assert "\n" not in said  # one line, as every fail-closed message


def test_a_replay_change_whose_row_the_patch_carries_names_the_review_not_the_command(
    tmp_path: Path,
) -> None:
    """The patch adds its own allowlist row: the hint to run `nox -s allow` would send the
    user in a circle; the review that applies the row is what is left to do."""
    repo = bake(tmp_path)

    def change(tree: Path) -> None:
        edit(tree / "src/shop/orders.py", '"cart has no items"', '"the cart is empty"')

    head = branch(repo, "agent/message", change)
    first = nox(repo, "-s", "judge", "--", "--head", head)
    allow_hint = re.search(r"nox -s allow -- --id \S+ --field \S+", first.stdout + first.stderr)
    assert allow_hint, first.stdout + first.stderr
    git(repo, "checkout", "-q", head)
    rows = nox(
        repo,
        "-s",
        "allow",
        "--",
        *allow_hint.group(0).split()[4:],
        "--reason",
        "wording",
        "--reviewer",
        "@a",
    )
    assert rows.returncode == 0, rows.stdout + rows.stderr
    git(repo, "commit", "-qam", "allow the new wording")
    git(repo, "checkout", "-q", "main")
    again = nox(repo, "-s", "judge", "--", "--head", head)
    line = last_line(again, "judge: replay: ")
    assert "the patch's oracle/allowlist.yaml carries its row" in line, line
    assert "nox -s allow" not in line, line
    summary = (repo / "reports/judge-summary.md").read_text("utf-8")
    assert "The patch carries its allowlist row" in summary


def readme_bake_block() -> list[str]:
    """The commands of the README's first block under "Bake a repository", as written."""
    text = (TEMPLATE / "README.md").read_text("utf-8").split("## Bake a repository", 1)[1]
    block = re.search(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    assert block, "the README lost its bake block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]


def test_the_readmes_bake_block_ends_in_merge_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cookiecutter gh:org/oracle-template` with every default (the placeholder owner too),
    then `cd shop && nox -s judge`: a user's first judgment merges, with the warning that
    names the line to change; where CI judges, the placeholder is refused."""
    monkeypatch.delenv("CI", raising=False)
    install, bake_line, judge_line = readme_bake_block()
    assert install.startswith("pip install")
    assert judge_line == "cd shop && nox -s judge"
    argv = bake_line.replace("gh:org/oracle-template", str(TEMPLATE)).split()
    baked = subprocess.run(
        [*argv, "--no-input"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert baked.returncode == 0, baked.stderr
    # The bake names the next commands, and the placeholder to replace.
    assert "  cd shop\n  nox -s judge" in baked.stderr, baked.stderr
    assert "CODEOWNERS names @org/maintainers, a placeholder" in baked.stderr
    shop = tmp_path / "shop"
    first = nox(shop, "-s", "judge")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "judge: verdict merge" in first.stdout + first.stderr
    warned = last_line(first, "judge: preconditions: pass: ")
    assert "warning: CODEOWNERS: protected path" in warned, warned
    in_ci = nox(shop, "-s", "judge", env={"CI": "true"})
    assert in_ci.returncode == 2, in_ci.stdout + in_ci.stderr
    refused = last_line(in_ci, "judge: preconditions: error: ")
    assert "owned by @org/maintainers, the template's placeholder" in refused, refused


def test_dev_py_adopt_exits_with_the_tools_own_code(tmp_path: Path) -> None:
    """tools/adopt.py exits 2 where it cannot adopt; `python3 dev.py adopt` with it, not with
    nox's 1 for any failure."""
    nowhere = tmp_path / "not-a-repository"
    proc = subprocess.run(
        [sys.executable, str(TEMPLATE / "dev.py"), "adopt", str(nowhere)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in said(proc).splitlines() if line.startswith("adopt: ")]
    assert proc.returncode == 2, said(proc)
    assert lines == [f"adopt: {nowhere}: not the top of a git repository"]


def test_adopt_again_after_its_branch_merged_says_nothing_is_left_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Adopted, its branch merged and kept: adopt again says the branch is merged (fast-forward
    or squashed) and what to run now, never to merge it; it changes nothing."""
    from tools import adopt, adopted_history

    for name, value in ADOPTER.items():
        monkeypatch.setenv(name, value)
    files = {"pyproject.toml": PYPROJECT, "tally.py": TALLY, "tests/test_tally.py": TALLY_TEST}
    repo = committed(tmp_path / "tally", files)
    wheelhouse = str(adopted_history.adopted_wheelhouse())
    argv = [str(repo), "--wheelhouse", wheelhouse, "--owners", "@org/gate"]
    assert adopt.main([*argv, "--no-check"]) == 0
    capsys.readouterr()
    git(repo, "checkout", "-q", "trunk")
    git(repo, "merge", "-q", "--ff-only", adopt.BRANCH)  # the branch stays
    git(repo, "checkout", "-q", "-b", "squashed", "trunk~1")
    git(repo, "merge", "-q", "--squash", adopt.BRANCH)
    git(repo, "commit", "-q", "-m", "Adopt the oracle gate, squashed")
    for base in ("trunk", "squashed"):
        git(repo, "checkout", "-q", base)
        head = git(repo, "rev-parse", "HEAD")
        assert adopt.main(argv) == 0
        lines = capsys.readouterr().out.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"adopt: {adopt.BRANCH} is merged into {base} already: ")
        assert "nothing to do" in lines[0]
        assert "`nox -s judge -- --head BRANCH`" in lines[0]
        assert "review and merge" not in lines[0]
        assert git(repo, "rev-parse", "HEAD") == head
        assert git(repo, "status", "--porcelain") == ""
