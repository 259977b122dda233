"""The gate's pytest plugin: what ran, as pytest names it, written by code from the base tree.

Loaded explicitly (`-p oracle_gate_evidence`, a copy of this file) into every pytest run the
gate starts. It records the collected node ids (and which are hypothesis properties), each
test's outcome, duration and message, and how many assertions passed in it (pytest's
`pytest_assertion_pass` hook, enabled with `enable_assertion_pass_hook`), and writes them as
JSON when the session ends. Ids are
`report.nodeid` verbatim, never rebuilt from JUnit class names. With `--oracle-sources ROOT`
it also records the modules the run imported from files under ROOT, so the gate can tell a run
that tested a tree's own sources from one that tested the installed build. With
`--oracle-shard I/N` it deselects every test another shard owns (scripts/_gate/shard.py) and
records how many it deselected.

A run that dies before the session ends leaves no file: the gate reads that as truncated.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from _gate.shard import parse_shard

# An outcome never improves: a failed call stays failed when its teardown passes.
RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
MESSAGE_LIMIT = 500


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--oracle-evidence", help="JSON file the gate reads the run's results from")
    parser.addoption("--oracle-sources", help="record the modules imported from under this root")
    parser.addoption("--oracle-shard", help="run only the tests of shard I/N")


class Evidence:
    def __init__(self, path: Path, sources: str | None) -> None:
        self.path = path
        self.sources = Path(sources).resolve() if sources else None
        self.collected: list[str] = []
        self.properties: list[str] = []
        self.deselected = 0
        self.tests: dict[str, dict[str, Any]] = {}

    def row(self, nodeid: str) -> dict[str, Any]:
        return self.tests.setdefault(
            nodeid, {"outcome": "passed", "seconds": 0.0, "message": "", "hits": 0}
        )

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += len(items)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = [item.nodeid for item in session.items]
        # Hypothesis marks the function its @given wraps; every other test is an example.
        self.properties = [
            item.nodeid
            for item in session.items
            if getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        ]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = self.row(report.nodeid)
        row["seconds"] += report.duration
        if report.passed:
            return
        outcome = "skipped" if report.skipped else "failed"
        if report.failed and report.when != "call":
            outcome = "error"
        self.worsen(row, outcome, report.longreprtext)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A module that fails to import has no test ids: its own id carries the error.
        if report.failed:
            self.worsen(self.row(report.nodeid), "error", report.longreprtext)

    @staticmethod
    def worsen(row: dict[str, Any], outcome: str, message: str) -> None:
        if RANK[outcome] > RANK[row["outcome"]]:
            row["outcome"] = outcome
            row["message"] = message[-MESSAGE_LIMIT:]

    def pytest_assertion_pass(self, item: pytest.Item) -> None:
        self.row(item.nodeid)["hits"] += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        payload = {
            "collected": self.collected,
            "properties": self.properties,
            "deselected": self.deselected,
            "tests": self.tests,
            "exitstatus": int(exitstatus),
        }
        if self.sources is not None:
            payload["sources"] = imported_from(self.sources)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(payload), "utf-8")
        os.replace(tmp, self.path)


def imported_from(root: Path) -> dict[str, str]:
    """Module name -> its file relative to `root`, for every loaded module under `root`."""
    found = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        if path.is_relative_to(root):
            found[name] = path.relative_to(root).as_posix()
    return found


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("--oracle-evidence")
    if target:
        evidence = Evidence(Path(target), config.getoption("--oracle-sources"))
        config.pluginmanager.register(evidence, "oracle-gate-evidence")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    option = config.getoption("--oracle-shard")
    if not option:
        return
    shard = parse_shard(option)
    kept: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        (kept if shard.owns(item.nodeid) else other).append(item)
    if other:
        items[:] = kept
        config.hook.pytest_deselected(items=other)
