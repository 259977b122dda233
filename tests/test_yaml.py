"""A key written twice in any YAML file the gate reads fails closed with the key and its line.

YAML keeps the last of two equal keys silently: a second `protected:` in judge.yaml would drop
every default protection, a second `cases:` every case. Each file is read by its own step.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import check_quarantine
import count_asserts
import pytest
import record_cassettes
import write_set
from _gate.core.config import load_config, load_yaml
from _gate.core.protocol import FailClosed

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

CASE = "  - id: one\n    argv: []\n    compare: [exit_code]\n"


def report_of(tmp: Path, run: Callable[[list[str]], int], *argv: str) -> tuple[int, str]:
    report = tmp / "report.json"
    code = run([*argv, "--report", str(report)])
    return code, str(json.loads(report.read_text())["summary"])


def test_second_protected_key_in_judge_yaml(shop: Path, tmp_path: Path) -> None:
    """The bake's own judge.yaml with `protected: []` appended: today's silent unprotect."""
    text = (shop / "oracle/judge.yaml").read_text()
    first = 1 + next(i for i, line in enumerate(text.splitlines()) if line.startswith("protected:"))
    config = tmp_path / "judge.yaml"
    config.write_text(text + "protected: []\n")
    argv = ("--repo", str(shop), "--base", "main", "--head", "main", "--config", str(config))
    code, summary = report_of(tmp_path, write_set.main, *argv)
    assert code == 2
    last = len(text.splitlines()) + 1
    assert summary == (
        f"{config}: line {last}: duplicate key 'protected' (first on line {first}); "
        "keep one: YAML would silently use only the last"
    )


@pytest.mark.parametrize(
    ("text", "key", "line", "first"),
    [
        ("cases:\n" + CASE + "cases: []\n", "cases", 5, 1),
        ("cases:\n" + CASE + "    compare: [stdout.raw]\n", "compare", 5, 4),
        ("cases:\n  - {id: one, argv: [], id: two, compare: [exit_code]}\n", "id", 2, 2),
        ('"cases":\n' + CASE + "cases: []\n", "cases", 5, 1),
    ],
    ids=["top-level", "nested-in-a-case", "flow-row", "quoted-and-plain"],
)
def test_duplicate_key_in_cases_yaml(
    tmp_path: Path, text: str, key: str, line: int, first: int
) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(text)
    argv = ("--command", sys.executable, "--base", "a" * 40, "--out", str(tmp_path / "c.json"))
    code, summary = report_of(tmp_path, record_cassettes.main, *argv, "--cases", str(cases))
    assert code == 2
    assert summary.startswith(
        f"{cases}: line {line}: duplicate key {key!r} (first on line {first})"
    )


def test_duplicate_key_in_an_allowlist_row(tmp_path: Path) -> None:
    allowlist = tmp_path / "allowlist.yaml"
    row = '{id: a, field: "inventory:fewer-asserts", base: "abcdef0", reason: r, reviewer: "@b"'
    allowlist.write_text(f"allow:\n  - {row}, field: inventory:total-drop}}\n")
    (tmp_path / "parent").mkdir()
    (tmp_path / "patch").mkdir()
    trees = ("--parent", str(tmp_path / "parent"), "--patch", str(tmp_path / "patch"))
    code, summary = report_of(tmp_path, count_asserts.main, *trees, "--allowlist", str(allowlist))
    assert code == 2
    assert summary.startswith(f"{allowlist}: line 2: duplicate key 'field' (first on line 2)")


def test_duplicate_key_in_a_quarantine_row(tmp_path: Path) -> None:
    quarantine = tmp_path / "quarantine.yaml"
    quarantine.write_text(
        "quarantine:\n"
        "  - id: tests/test_a.py::test_a\n"
        "    until: 2099-01-01\n"
        "    reason: flaky clock\n"
        "    owner: '@a'\n"
        "    until: 2999-01-01\n"
    )
    trees = ("--parent", str(tmp_path), "--patch", str(tmp_path))
    code, summary = report_of(tmp_path, check_quarantine.main, "--file", str(quarantine), *trees)
    assert code == 2
    assert summary.startswith(f"{quarantine}: line 6: duplicate key 'until' (first on line 3)")


def test_equal_keys_in_different_mappings_and_merge_overrides_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        "defaults: &d {compare: [exit_code], argv: []}\n"
        "cases:\n"
        "  - {<<: *d, id: one}\n"
        "  - <<: *d\n"
        "    id: two\n"
        "    compare: [stdout.raw]\n"
    )
    data = load_yaml(path)
    assert [case["id"] for case in data["cases"]] == ["one", "two"]
    assert data["cases"][1]["compare"] == ["stdout.raw"]


@pytest.mark.parametrize(
    ("line", "mode"),
    [("crossrun: off", "off"), ("crossrun: 'off'", "off"), ("crossrun: advisory", "advisory")],
    ids=["bare-off-is-yaml-false", "quoted-off", "advisory"],
)
def test_crossrun_mode_reads_as_written(shop: Path, tmp_path: Path, line: str, mode: str) -> None:
    config = tmp_path / "judge.yaml"
    config.write_text((shop / "oracle/judge.yaml").read_text().replace("crossrun: block", line))
    assert load_config(config).crossrun == mode


def test_unknown_crossrun_mode_fails_closed_naming_the_choices(shop: Path, tmp_path: Path) -> None:
    config = tmp_path / "judge.yaml"
    text = (shop / "oracle/judge.yaml").read_text().replace("crossrun: block", "crossrun: on")
    config.write_text(text)
    with pytest.raises(FailClosed, match="'crossrun' must be one of block, advisory, off"):
        load_config(config)


@pytest.mark.parametrize(
    ("line", "minimum"),
    [
        ("variance_machines: 0", 1),
        ("variance_runs: 1", 2),
        ("ledger_ttl_days: 0", 1),
        ("flake_max_retry: -1", 0),
        ("jobs: -2", 0),
    ],
)
def test_a_count_below_its_minimum_fails_closed_naming_the_field(
    shop: Path, tmp_path: Path, line: str, minimum: int
) -> None:
    config = tmp_path / "judge.yaml"
    field = line.split(":")[0]
    text = re.sub(rf"(?m)^{field}: .*$", line, (shop / "oracle/judge.yaml").read_text())
    config.write_text(text)
    with pytest.raises(
        FailClosed, match=f"judge.yaml: field '{field}' must be at least {minimum}$"
    ):
        load_config(config)
