"""Additive compare specs (issue 25): help text a patch may add to, never take from.

`stdout.additive` holds while every word the parent printed is still printed, in order
(`cases.holds`). The rule is checked on real argparse output (the spellings a new option makes:
a longer usage line, wrapped again; a help column moved; descriptions wrapped again) and on
the edits that must block. A real bake's help cases then judge real patches through the whole
judge: an added option merges and the summary shows the lines it added; a renamed option blocks,
prints the `nox -s allow` command that allows it, and that command, run as printed with its
two placeholders filled in, makes the reviewed rename merge. The strength cassettes and
`nox -s case` read the spec the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import add_case
import allow
import pytest
import yaml
from _gate.core.allowlist import allow_command
from _gate.core.protocol import FailClosed
from _gate.runs.cases import added_lines, holds, load_cases
from _gate.runs.cassettes import record

from tests.helpers import SCRIPTS, Change, edits
from tools.bakery import branch, git, judge

ADDITIVE = "stdout.additive"
Option = tuple[tuple[str, ...], str]  # (flags and metavar, help)
CART: Option = (("--cart", "PATH"), "cart JSON file, - for stdin")
ID: Option = (("--id", "ID"), "order id, made of letters, digits and dashes")
JSON: Option = (("--json", "PATH"), "cart JSON file, - for stdin; the order is stored as given")
LONG: Option = (("--max-supported-python", "VERSION"), "the newest Python to declare")
INDENT: Option = (("--indent", "N"), "indent the JSON by N spaces")


def help_text(*options: Option, width: int = 60, description: str = "Store an order.") -> str:
    """What argparse prints for `--help` with these options, wrapped at `width` columns."""
    parser = argparse.ArgumentParser(
        prog="shop order put",
        description=description,
        formatter_class=lambda prog: argparse.HelpFormatter(prog, width=width),
    )
    for (flag, metavar), text in options:
        parser.add_argument(flag, metavar=metavar, help=text)
    return parser.format_help()


def line_of(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip().startswith(start))


# --- the rule -----------------------------------------------------------------------------


def test_an_added_option_that_rewraps_the_usage_line_holds() -> None:
    before, after = help_text(CART, ID), help_text(CART, ID, INDENT)
    assert line_of(after, "usage:").endswith("[--id ID]")  # wrapped: the new option below
    assert line_of(after, "[--indent N]").strip() == "[--indent N]"
    assert holds(ADDITIVE, before, after)
    assert not holds("stdout.raw", before, after)


def test_an_added_option_that_moves_the_help_column_holds() -> None:
    before, after = help_text(CART), help_text(CART, LONG)
    assert line_of(before, "--cart") != line_of(after, "--cart")  # realigned: more spaces
    assert holds(ADDITIVE, before, after)


def test_descriptions_wrapped_again_hold() -> None:
    """The moved column leaves less room: an option's help wraps onto more lines, and textwrap
    breaks a wrapped line after a hyphen as well as at a space."""
    before, after = help_text(CART, ID, JSON), help_text(CART, ID, JSON, LONG)
    assert line_of(before, "--id").endswith("digits and dashes")
    assert line_of(after, "--id").endswith("digits")  # "and dashes" on a line of its own
    assert holds(ADDITIVE, before, after)
    hyphen = "usage: shop [-h]\n\nSee --max-supported-python for the newest one.\n"
    wrapped = "usage: shop [-h] [--indent N]\n\nSee --max-\nsupported-python for the\nnewest one.\n"
    assert holds(ADDITIVE, hyphen, wrapped)


def subcommands(*names: str) -> str:
    """What argparse prints for `--help` of a CLI with these subcommands."""
    parser = argparse.ArgumentParser(prog="shop")
    commands = parser.add_subparsers(dest="command")
    for name in names:
        commands.add_parser(name, help=f"{name} an order")
    return parser.format_help()


def test_an_added_subcommand_holds_and_a_renamed_one_does_not() -> None:
    before = subcommands("create", "put")
    assert "{create,put}" in before  # one word to str.split: the new choice must not change it
    assert holds(ADDITIVE, before, subcommands("create", "put", "delete"))
    assert not holds(ADDITIVE, before, subcommands("create", "store"))
    assert not holds(ADDITIVE, before, subcommands("create"))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (help_text(CART, ID, JSON), help_text(CART, ID)),
        (help_text(CART, INDENT), help_text(CART, (("--indentation", "N"), INDENT[1]))),
        (help_text(CART, INDENT), help_text(CART, (("--indent", "WIDTH"), INDENT[1]))),
        (help_text(CART), help_text((("--cart", "PATH"), "cart YAML file, - for stdin"))),
        (help_text(CART, ID), help_text(ID, CART)),
        (help_text(CART), help_text(CART, description="Store orders.")),
    ],
    ids=["flag-removed", "flag-renamed", "metavar-renamed", "word-changed", "reordered", "plural"],
)
def test_a_removed_renamed_or_reworded_text_does_not_hold(before: str, after: str) -> None:
    assert not holds(ADDITIVE, before, after)
    assert not holds("stderr.additive", before, after)
    assert holds(ADDITIVE, before, before)


@pytest.mark.parametrize(
    ("spec", "recorded", "observed", "expected"),
    [
        ("stdout.raw", "a b\n", "a b\n", True),
        ("stdout.raw", "a b\n", "a  b\n", False),
        ("stderr.raw", "a\n", "a\nb\n", False),
        ("stdout.json", {"a": 1}, {"a": 1, "b": 2}, False),
        ("stdout.json.pointer:/a", [1, 2], [1, 2], True),
        ("exit_code", 0, 0, True),
        ("exit_code", 0, 2, False),
        ("stdout.sha256", "ab", "abc", False),
        # A stream past the cap is a digest: held to equality, additive or not.
        (ADDITIVE, {"$truncated": True, "sha256": "a"}, {"$truncated": True, "sha256": "b"}, False),
        (ADDITIVE, "usage: x\n", {"$non_utf8": True, "head": "usage: x [-h]"}, False),
    ],
)
def test_every_other_spec_is_held_to_equality(
    spec: str, recorded: object, observed: object, expected: bool
) -> None:
    assert holds(spec, recorded, observed) is expected


def test_the_added_lines_are_the_new_ones_not_the_realigned() -> None:
    before, after = help_text(CART), help_text(CART, LONG)
    added = added_lines(before, after)
    assert [line.split() for line in added] == [
        ["[--max-supported-python", "VERSION]"],
        ["--max-supported-python", "VERSION"],
        LONG[1].split(),
    ]
    assert line_of(before, "--cart") != line_of(after, "--cart")  # realigned, not shown
    assert added_lines(before, before) == []


def test_cases_accept_the_additive_specs(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    case = {"id": "help", "argv": ["--help"], "compare": ["exit_code", ADDITIVE, "stderr.additive"]}
    path.write_text(yaml.safe_dump({"cases": [case]}))
    assert load_cases(path)[0].compare == ("exit_code", ADDITIVE, "stderr.additive")
    path.write_text(yaml.safe_dump({"cases": [{**case, "compare": ["stdout.additive.x"]}]}))
    with pytest.raises(FailClosed) as raised:
        load_cases(path)
    assert "unknown compare spec 'stdout.additive.x'" in str(raised.value)
    assert "stdout.additive, stderr.additive" in str(raised.value)  # listed as known


@pytest.mark.parametrize(
    ("argv", "additive"),
    [(["--help"], True), (["order", "put", "-h"], True), (["order", "--helpful"], False)],
)
def test_a_help_command_line_compares_stdout_additively(argv: list[str], additive: bool) -> None:
    assert (add_case.stdout_spec(argv, []) == ADDITIVE) is additive


def test_the_allow_command_quotes_for_the_shell_and_names_real_flags() -> None:
    node = "tests/test_x.py::test_y[it's a b]"
    argv = shlex.split(allow_command(node, "crossrun"))
    assert argv[:4] == ["nox", "-s", "allow", "--"]
    parsed = allow.parser().parse_args(argv[4:])
    assert (parsed.id, parsed.field, parsed.reviewer) == (node, "crossrun", "@<you>")


# --- the strength cassettes ------------------------------------------------------------------

STRENGTH_CLI = """\
import os

GROWN = os.environ.get("MUTANT_UNDER_TEST") == "grown"
RENAMED = os.environ.get("MUTANT_UNDER_TEST") == "renamed"
print("usage: shop [-h]" + (" [--version]" if GROWN else ""))
print()
print("options:")
print("  -h, --help  show this help message and exit")
if GROWN:
    print("  --version   show the version and exit")
print("  --cart PATH" if not RENAMED else "  --basket PATH")
"""


@pytest.mark.parametrize(("mutant", "killed"), [("grown", False), ("renamed", True)])
def test_a_mutant_that_only_adds_help_text_is_not_killed_by_an_additive_case(
    tmp_path: Path, mutant: str, killed: bool
) -> None:
    """scripts/_gate/strength/strength_cassettes.py, as mutmut runs it under a mutant, against a CLI
    whose help grows under one mutant and loses a word under the other: as replay judges."""
    cli = tmp_path / "shop"
    cli.write_text(f"#!{sys.executable}\n" + STRENGTH_CLI)
    cli.chmod(0o755)
    cases = tmp_path / "cases.yaml"
    case = {"id": "help", "argv": ["--help"], "compare": ["exit_code", ADDITIVE]}
    cases.write_text(yaml.safe_dump({"cases": [case]}))
    recorded = record(cli, load_cases(cases), tmp_path, "")["cases"]
    recording = tmp_path / "recording.json"
    expected = {case_id: row["fields"] for case_id, row in recorded.items()}
    found = {"command": str(cli), "command_name": "shop", "cases": str(cases)}
    recording.write_text(json.dumps({**found, "fixtures": str(tmp_path), "expected": expected}))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant, "ORACLE_STRENGTH_MUTATED": str(tmp_path)}
    env.update(ORACLE_STRENGTH_RECORDING=str(recording), PYTHONDONTWRITEBYTECODE="1")
    test = SCRIPTS / "_gate" / "strength" / "strength_cassettes.py"
    pytest_argv = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "pytest.ini", str(test)]
    proc = subprocess.run(
        [sys.executable, *pytest_argv], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == (1 if killed else 0), proc.stdout[-3000:]
    assert ("1 failed" if killed else "1 passed") in proc.stdout


# --- nox -s case on a real bake --------------------------------------------------------------


def test_nox_case_saves_a_help_case_comparing_stdout_additively(repo: Path, tmp_path: Path) -> None:
    report = tmp_path / "case.json"
    code = add_case.main(["--repo", str(repo), "--report", str(report), "--", "order", "-h"])
    summary = json.loads(report.read_text())["summary"]
    assert code == 0, summary
    assert load_cases(repo / "oracle/cases.yaml")[-1].compare == (
        "exit_code",
        ADDITIVE,
        "stderr.sha256",
    )


# --- whole judges on a real bake -------------------------------------------------------------

VERSION_OPTION = (
    "    commands = parser.add_subparsers(",
    '    parser.add_argument("--version", action="version", version=f"shop {version(\'shop\')}")\n'
    "    commands = parser.add_subparsers(",
)
VERSION_IMPORT = ("import sys\n", "import sys\nfrom importlib.metadata import version\n")
# `order create --indent N`: the quote indented; without it, the one line it always was.
INDENT_OPTION = (
    "    create.set_defaults(run=_create)",
    '    create.add_argument("--indent", type=int, metavar="N", help="indent the quote by N")\n'
    "    create.set_defaults(run=_create)",
)
INDENT_USED = ("    _emit(document)\n", '    _emit(document, getattr(args, "indent", None))\n')
INDENT_EMIT = (
    "def _emit(document: dict[str, object]) -> None:\n"
    "    print(json.dumps(document, sort_keys=True))",
    "def _emit(document: dict[str, object], indent: int | None = None) -> None:\n"
    "    print(json.dumps(document, sort_keys=True, indent=indent))",
)
# `order put --cart PATH`, `--json` kept as an alias: every case still runs, the help lost it.
RENAME = (
    '        "--json",\n',
    '        "--cart",\n        "--json",\n',
)
CLI = "src/shop/cli.py"


def cli_edits(*changes: tuple[str, str]) -> Change:
    return edits(*((CLI, old, new) for old, new in changes))


def summary_of(repo: Path) -> str:
    return (repo / "reports/judge-summary.md").read_text("utf-8")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("name", "changes", "case", "added"),
    [
        (
            "add-version",
            (VERSION_IMPORT, VERSION_OPTION),
            "help-exits-zero",
            ["[--version]", "--version show program's version number and exit"],
        ),
        (
            "add-indent",
            (INDENT_OPTION, INDENT_USED, INDENT_EMIT),
            "help-of-order-create",
            ["[--indent N]", "--indent N indent the quote by N"],
        ),
    ],
)
def test_a_patch_adding_an_option_merges_and_the_summary_shows_what_it_added(
    shop: Path, name: str, changes: Sequence[tuple[str, str]], case: str, added: list[str]
) -> None:
    verdict = judge(shop, "--head", branch(shop, name, cli_edits(*changes)))
    assert (verdict.returncode, verdict.report.get("verdict")) == (0, "merge"), verdict.output
    replay = verdict.step("replay")
    assert "1 additive fields grew" in replay["summary"]
    grown = replay["evidence"]["grown"]
    assert [(row["id"], row["field"]) for row in grown] == [(case, ADDITIVE)]
    summary = summary_of(shop)
    assert "### Additive fields that grew" in summary
    shown = summary.split("### Additive fields that grew")[1]
    lines = [" ".join(line.split()) for line in shown.splitlines() if line.startswith("+ ")]
    for text in added:
        assert any(text in line for line in lines), shown


def allow_argv(command: str, reason: str, reviewer: str) -> list[str]:
    """The printed command with its two placeholders filled in, nothing else changed."""
    argv = shlex.split(command)
    for flag, value in (("--reason", reason), ("--reviewer", reviewer)):
        argv[argv.index(flag) + 1] = value
    return argv


@pytest.mark.e2e
def test_a_renamed_option_blocks_naming_the_allow_command_which_lets_it_merge(
    repo: Path,
) -> None:
    head = branch(repo, "rename-json", cli_edits(RENAME))
    verdict = judge(repo, "--head", head)
    assert (verdict.returncode, verdict.report.get("verdict")) == (1, "block"), verdict.output
    replay = verdict.step("replay")
    (mismatch,) = replay["evidence"]["mismatches"]
    assert (mismatch["id"], mismatch["field"]) == ("help-of-order-put", ADDITIVE)
    command = mismatch["allow"]
    assert command == allow_command("help-of-order-put", ADDITIVE)
    assert command.startswith("nox -s allow -- --id help-of-order-put --field stdout.additive")
    assert command in replay["summary"]
    assert f"judge: replay: block: {replay['summary']}" in verdict.output
    summary = summary_of(repo)
    assert f"`{command}`" in summary
    assert "-usage: shop order put [-h] --id ID --json PATH" in summary
    # A reviewer runs it on the patch's branch and commits the row there, as
    # docs/change-the-contract.md says; the judge reads it once told the review happened.
    git(repo, "checkout", "-q", head)
    argv = allow_argv(command, "--cart is the name; --json stays an alias", "@alice")
    proc = subprocess.run(argv, cwd=repo, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    git(repo, "commit", "-q", "--no-verify", "-m", "allow the rename", "oracle/allowlist.yaml")
    git(repo, "checkout", "-q", "main")
    reviewed = judge(repo, "--head", head, env={"ORACLE_REVIEW": "1"})
    assert (reviewed.returncode, reviewed.report.get("verdict")) == (0, "merge"), reviewed.output
    allowed = reviewed.step("replay")["evidence"]["allowed"]
    assert [(row["id"], row["field"]) for row in allowed] == [("help-of-order-put", ADDITIVE)]
