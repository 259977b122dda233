"""`nox -s case` (scripts/add_case.py): a case from a command line, run twice on a real build."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import add_case
import pytest
from _gate.runs.cases import load_cases

from tools.bakery import branch, edit, git, judge

CART = '{"items": [{"sku": "MUG", "qty": 2, "price_cents": 1250}]}'


def add(repo: Path, tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "case.json"
    code = add_case.main(["--repo", str(repo), "--report", str(report), *argv])
    return code, json.loads(report.read_text())


def cases_file(repo: Path) -> Path:
    return repo / "oracle/cases.yaml"


def test_a_command_line_becomes_a_case_comparing_what_it_showed(repo: Path, tmp_path: Path) -> None:
    before = cases_file(repo).read_text()
    code, report = add(repo, tmp_path, "--stdin", CART, "--", "order", "create", "--cart", "-")
    assert (code, report["status"]) == (0, "saved"), report["summary"]
    after = cases_file(repo).read_text()
    assert after.startswith(before.rstrip("\n")), "the file's comments and cases are kept"
    case = load_cases(cases_file(repo))[-1]
    assert case.id == "order-create-cart"
    assert case.argv == ("order", "create", "--cart", "-")
    assert case.stdin == CART.encode()
    # The example CLI prints JSON, so stdout is compared as JSON, not as text.
    assert case.compare == ("exit_code", "stdout.json", "stderr.sha256")
    assert report["evidence"]["seen"]["stdout.json"]["order"]["total_cents"] == 2500
    assert report["evidence"]["suspicious"] == []


def test_each_field_is_shown_with_its_value_before_it_is_saved(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--id", "shown", "--stdin", CART, "--", "order", "create", "--cart", "-"]
    code, report = add(repo, tmp_path, *argv)
    assert code == 0, report["summary"]
    out = capsys.readouterr().out.splitlines()
    seen = report["evidence"]["seen"]
    assert "case: exit_code = 0" in out
    stdout = next(line for line in out if line.startswith("case: stdout.json = "))
    assert json.loads(stdout.removeprefix("case: stdout.json = ")) == seen["stdout.json"]
    assert f"case: stderr.sha256 = {seen['stderr.sha256']}" in out


def test_help_is_an_ordinary_case(repo: Path, tmp_path: Path) -> None:
    code, report = add(repo, tmp_path, "--", "--help")
    assert (code, report["status"]) == (0, "saved"), report["summary"]
    assert report["evidence"]["suspicious"] == []
    assert load_cases(cases_file(repo))[-1].argv == ("--help",)


def test_a_run_that_looks_wrong_is_shown_and_saved_only_when_confirmed(
    repo: Path, tmp_path: Path
) -> None:
    before = cases_file(repo).read_text()
    code, report = add(repo, tmp_path, "--", "order", "frobnicate")
    assert (code, report["status"]) == (1, "not-saved")
    found = report["evidence"]["suspicious"]
    assert found[0] == "it exits 2"
    assert "it prints a usage or argument error" in found
    assert cases_file(repo).read_text() == before
    code, report = add(repo, tmp_path, "--yes", "--id", "unknown-action", "--", "order", "x")
    assert (code, report["status"]) == (0, "saved")
    assert load_cases(cases_file(repo))[-1].id == "unknown-action"


def test_a_field_that_differs_between_the_runs_is_left_out(repo: Path, tmp_path: Path) -> None:
    def clock(tree: Path) -> None:
        edit(
            tree / "src/shop/cli.py",
            "def main(argv: Sequence[str] | None = None) -> int:\n",
            "def main(argv: Sequence[str] | None = None) -> int:\n"
            "    import time\n\n    print(time.time_ns())\n",
        )

    git(repo, "checkout", "--quiet", branch(repo, "clock", clock))
    code, report = add(repo, tmp_path, "--stdin", CART, "--", "order", "create", "--cart", "-")
    assert code == 0, report["summary"]
    assert load_cases(cases_file(repo))[-1].compare == ("exit_code", "stderr.sha256")
    assert list(report["evidence"]["unstable"]) == ["stdout.raw"]
    assert "left out as unstable: stdout.raw" in report["summary"]


VERSION_OPTION = (
    "    commands = parser.add_subparsers(",
    "    from importlib.metadata import version\n\n"
    '    parser.add_argument("--version", action="version", version=f"shop {version(\'shop\')}")\n'
    "    commands = parser.add_subparsers(",
)


def test_a_field_that_changes_with_the_version_is_left_out(repo: Path, tmp_path: Path) -> None:
    """`--version` prints each commit's own version (as hatch-vcs gives every commit one): the
    case is run on HEAD's parent too, and stdout, which differs only by the version, is left
    out; a field that is the same on both commits is kept."""
    versioned = branch(
        repo, "case-version", lambda tree: edit(tree / "src/shop/cli.py", *VERSION_OPTION)
    )
    bump = branch(
        repo,
        "case-version-bump",
        lambda tree: edit(tree / "pyproject.toml", 'version = "0.1.0"', 'version = "0.2.0"'),
        base=versioned,
    )
    git(repo, "checkout", "--quiet", bump)
    code, report = add(repo, tmp_path, "--", "--version")
    assert code == 0, report["summary"]
    assert load_cases(cases_file(repo))[-1].compare == ("exit_code", "stderr.sha256")
    assert report["evidence"]["versioned"] == ["stdout.raw"]
    assert report["evidence"]["seen"]["stdout.raw"] == "shop 0.2.0\n"
    assert "left out as changing with the version: stdout.raw" in report["summary"]
    # On the commit that added the option, its parent has no --version: the fields differ by
    # more than a version. Its stdout prints the build's own version (0.1.0, from its
    # METADATA), which changes at the next release: left out all the same, and said so.
    git(repo, "checkout", "--quiet", versioned)
    code, report = add(repo, tmp_path, "--id", "version-2", "--yes", "--", "--version")
    assert report["evidence"]["versioned"] == ["stdout.raw"], report["summary"]
    assert report["evidence"]["seen"]["stdout.raw"] == "shop 0.1.0\n"
    assert load_cases(cases_file(repo))[-1].compare == ("exit_code", "stderr.sha256")
    # A case that prints no version keeps its stdout.
    code, report = add(repo, tmp_path, "--id", "help-2", "--", "--help")
    assert (code, report["evidence"]["versioned"]) == (0, []), report["summary"]


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--id", "empty-cart-rejects", "--", "order"], "'empty-cart-rejects' is already in use"),
        ([], "no command line given"),
    ],
)
def test_bad_arguments_fail_closed_and_write_nothing(
    repo: Path, tmp_path: Path, argv: list[str], why: str
) -> None:
    before = cases_file(repo).read_text()
    code, report = add(repo, tmp_path, *argv)
    assert (code, report["status"]) == (2, "error")
    assert why in report["summary"]
    assert cases_file(repo).read_text() == before


def test_a_case_that_cannot_go_last_is_refused_and_the_file_restored(
    repo: Path, tmp_path: Path
) -> None:
    path = cases_file(repo)
    flow = 'cases: [{id: help, argv: ["--help"], compare: [exit_code]}]\n'
    path.write_text(flow)
    code, report = add(repo, tmp_path, "--stdin", CART, "--", "order", "create", "--cart", "-")
    assert code == 2
    assert "add it by hand" in report["summary"]
    assert path.read_text() == flow


def comment(line: str) -> Callable[[Path], None]:
    """A change that makes a build of its own and behaves as its parent."""

    def change(tree: Path) -> None:
        with (tree / "src/shop/cli.py").open("a", encoding="utf-8") as source:
            source.write(f"\n# {line}\n")

    return change


def test_a_case_and_a_judgment_share_the_environments_they_build(
    repo: Path, tmp_path: Path
) -> None:
    """`nox -s case` builds its commit as a judgment builds its base, and keeps it under the
    same key in the same cache (_gate/runs/kept_envs.base_env): a case on a patch a judgment built
    runs with no build, and the build of a commit a case ran on is the parent's of the next
    judgment on it."""
    judged = branch(repo, "case-on-judged", comment("judged first"))
    assert judge(repo, "--head", judged).statuses["build"] == "pass"
    code, report = add(repo, tmp_path, "--ref", judged, "--id", "on-judged", "--", "--help")
    assert (code, report["evidence"]["build"]) == (0, "kept"), report["summary"]
    first = branch(repo, "case-first", comment("a case first"))
    built = [
        add(repo, tmp_path, "--ref", first, "--id", f"first-{n}", "--", "--help")[1] for n in (1, 2)
    ]
    assert [case["evidence"]["build"] for case in built] == ["built", "kept"]
    git(repo, "checkout", "--quiet", "--", "oracle/cases.yaml")
    patch = branch(repo, "case-first-patch", comment("then judged"), base=first)
    verdict = judge(repo, "--base", first, "--head", patch)
    build = next(step for step in verdict.report["steps"] if step["name"] == "build")
    assert "patch built into a fresh offline environment; the parent and" in build["summary"]
