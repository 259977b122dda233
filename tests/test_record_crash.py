"""A base whose recording is an uncaught Python exception fails the record step closed.

Real small CLIs (executable scripts, run as the judge runs a console script): the crash is named
by its case and its exception line, unless the case declares `expect_crash: true`.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import record_cassettes
import yaml

BASE = "c" * 40

IMPORT_ERROR = """\
import no_such_module_for_the_gate
print("never")
"""
RAISES = """\
import sys


def main() -> int:
    total = int(sys.argv[1])
    if total < 0:
        raise ValueError(f"negative total {total}")
    return 0


sys.exit(main())
"""
AFTER_OUTPUT = """\
import sys

print('{"partial": true}')
print("warning: price list is old", file=sys.stderr)
sys.stdout.flush()
sys.stderr.flush()
prices = {"MUG": 1250}
print(prices["PEN"])
"""
CHAINED = """\
try:
    {}["sku"]
except KeyError:
    raise RuntimeError("cannot price the cart") from None
"""
REFUSES = """\
import sys

print("error: cart is empty", file=sys.stderr)
print('{"error": {"code": "CART_EMPTY"}}')
sys.exit(1)
"""
QUOTES_A_TRACEBACK = """\
print("Traceback (most recent call last): is what a crash looks like")
"""


def cli(tmp: Path, name: str, body: str) -> Path:
    path = tmp / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def case(case_id: str, *argv: str, **extra: Any) -> dict[str, Any]:
    return {"id": case_id, "argv": list(argv), "compare": ["exit_code", "stdout.raw"], **extra}


def run_record(
    tmp: Path, command: Path, cases: list[dict[str, Any]], *extra: str
) -> tuple[int, dict[str, Any], Path]:
    cases_file = tmp / "cases.yaml"
    cases_file.write_text(yaml.safe_dump({"cases": cases}))
    out, report = tmp / "cassettes.json", tmp / "record.json"
    argv = ["--command", str(command), "--base", BASE, "--out", str(out)]
    argv += ["--cases", str(cases_file), "--fixtures", str(tmp), "--report", str(report), *extra]
    code = record_cassettes.main(argv)
    return code, json.loads(report.read_text()), out


@pytest.mark.parametrize(
    ("body", "argv", "exception"),
    [
        (IMPORT_ERROR, [], "ModuleNotFoundError: No module named 'no_such_module_for_the_gate'"),
        (RAISES, ["-5"], "ValueError: negative total -5"),
        (AFTER_OUTPUT, [], "KeyError: 'PEN'"),
        (CHAINED, [], "RuntimeError: cannot price the cart"),
    ],
    ids=["import-error", "raises-in-command", "after-output", "chained"],
)
def test_traceback_fails_closed_naming_case_and_exception(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, argv: list[str], exception: str
) -> None:
    command = cli(tmp_path, "shop", body)
    code, report, out = run_record(tmp_path, command, [case("prices", *argv)])
    assert code == 2
    summary = report["summary"]
    assert "case 'prices'" in summary
    assert f"({exception})" in summary
    assert "cases.yaml" in summary
    assert "expect_crash: true" in summary
    assert report["evidence"]["tracebacks"] == [{"id": "prices", "exception": exception}]
    assert not out.exists()  # a rejected recording is never reused
    printed = capsys.readouterr().err.strip().splitlines()
    assert len(printed) == 1
    assert "Traceback" not in printed[0]


def test_one_crashing_case_among_good_ones_is_named(tmp_path: Path) -> None:
    command = cli(tmp_path, "shop", RAISES)
    cases = [case("fine", "3"), case("negative", "-1"), case("also-fine", "0")]
    code, report, _ = run_record(tmp_path, command, cases)
    assert code == 2
    assert "case 'negative'" in report["summary"]
    assert "more cases" not in report["summary"]


def test_error_message_and_exit_1_is_a_contract(tmp_path: Path) -> None:
    command = cli(tmp_path, "shop", REFUSES)
    code, report, out = run_record(tmp_path, command, [case("empty-cart")])
    assert code == 0, report["summary"]
    recorded = json.loads(out.read_text())["cases"]["empty-cart"]
    assert recorded["fields"]["exit_code"] == 1
    assert recorded["traceback"] is None


def test_traceback_words_on_stdout_are_output(tmp_path: Path) -> None:
    command = cli(tmp_path, "shop", QUOTES_A_TRACEBACK)
    code, report, _ = run_record(tmp_path, command, [case("docs")])
    assert code == 0, report["summary"]


def test_expected_crash_is_recorded(tmp_path: Path) -> None:
    command = cli(tmp_path, "shop", IMPORT_ERROR)
    code, report, out = run_record(tmp_path, command, [case("crash", expect_crash=True)])
    assert code == 0, report["summary"]
    recorded = json.loads(out.read_text())["cases"]["crash"]
    assert recorded["fields"]["exit_code"] == 1
    assert recorded["traceback"].startswith("ModuleNotFoundError")
    assert report["evidence"]["tracebacks"] == []


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_expect_crash_must_be_a_bool(tmp_path: Path, value: object) -> None:
    command = cli(tmp_path, "shop", REFUSES)
    code, report, _ = run_record(tmp_path, command, [case("c", expect_crash=value)])
    assert code == 2
    assert "case 'c': field 'expect_crash'" in report["summary"]


def test_reuse_does_not_trust_a_cassette_that_never_looked_for_tracebacks(
    tmp_path: Path,
) -> None:
    """A cassette of a crashing base saved before this check must be recorded again."""
    good = cli(tmp_path, "good", REFUSES)
    code, _, out = run_record(tmp_path, good, [case("prices", "-5")])
    assert code == 0
    old = json.loads(out.read_text())
    for entry in old["cases"].values():
        del entry["traceback"], entry["expect_crash"]
    out.write_text(json.dumps(old))
    crashing = cli(tmp_path, "crashing", RAISES)
    code, report, _ = run_record(tmp_path, crashing, [case("prices", "-5")], "--reuse")
    assert code == 2
    assert "ValueError: negative total -5" in report["summary"]
