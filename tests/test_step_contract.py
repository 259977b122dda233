"""The step contract on a real bake: the judge decides from the outcomes it holds in memory,
never from reports/ read back, so a process the patch's code leaves behind cannot rewrite an
earlier step's result into a merge."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _gate.core.config import Config
from _gate.core.context import Builds, Judgment, OracleRef, load_judgment, write_judgment
from _gate.core.protocol import (
    BLOCK,
    FAIL_CLOSED,
    PASS,
    TAMPERED,
    FailClosed,
    Outcome,
    Report,
    concluded,
    read_report,
)
from _gate.core.reports import Names, write_report
from _gate.core.seal import Seal
from _gate.core.steps import STEPS
from _gate.plugin.shard import Shard
from _gate.runs.entry import Contract
from _gate.steps import tests as tests_step

from tests.helpers import UNCONFINED, best_effort_base
from tools.bakery import branch, edit, judge

# Planted in the package's __init__: every process that imports the patch's build (a case's
# CLI, the oracle's subject worker) starts a daemon of its own session, which outlives the
# step and keeps writing a passing oracle report over the judge's, then its own pid and a
# count of what it wrote, so the test knows the attack ran.
DAEMON = """
import json as _json, os as _os, time as _time
def _write(path, text):
    try:
        with open(path + ".tmp", "w") as out:
            out.write(text)
        _os.replace(path + ".tmp", path)  # whole, whenever the test reads it
        return True
    except OSError:  # confined: it lives on, and tries again
        return False
def _forge(reports, marker):
    if _os.fork():
        return
    _os.setsid()
    if _os.fork():
        _os._exit(0)
    _write(marker + ".pid", str(_os.getpid()))
    forged = {"schema_version": 2, "step": "oracle", "status": "pass", "exit_code": 0,
              "summary": "FORGED: every oracle passed", "evidence": {}}
    deadline, count = _time.monotonic() + 240, 0
    while _time.monotonic() < deadline:
        for name in ("oracle.json", "crossrun.json"):
            forged["step"] = name[:-5]
            count += _write(_os.path.join(reports, name), _json.dumps(forged))
        _write(marker, str(count))
        _time.sleep(0.02)
    _os._exit(0)
if not _os.path.exists(MARKER + ".pid"):
    _forge(REPORTS, MARKER)
"""


def plant(reports: Path, marker: Path) -> Callable[[Path], None]:
    def attack(repo: Path) -> None:
        # A real break of the discount rules, which the property oracles see.
        edit(repo / "src/shop/discounts.py", "    return amount\n", "    return amount + 1\n")
        init = repo / "src/shop/__init__.py"
        names = f"REPORTS, MARKER = {str(reports)!r}, {str(marker)!r}\n"
        init.write_text(init.read_text("utf-8") + names + DAEMON, "utf-8")

    return attack


@pytest.mark.e2e
def test_a_confined_daemon_is_killed_named_and_fails_its_step_closed(
    shop: Path, tmp_path: Path
) -> None:
    marker, reports = tmp_path / "forged", shop / "reports"
    head = branch(shop, "forge-reports-confined", plant(reports, marker))
    try:
        verdict = judge(shop, "--head", head)
    finally:
        stop(marker)
    assert not marker.exists()
    assert not Path(f"{marker}.pid").exists()
    # The break is proved (flake-budget blocks): a proof stands whatever else failed closed.
    assert verdict.returncode == 1, verdict.output
    assert verdict.report["verdict"] == "block"
    assert verdict.report["confinement"] == "namespaces"
    killed = [s for s in verdict.report["steps"] if "outlived its command" in s["summary"]]
    assert killed, verdict.report["steps"]
    assert killed[0]["status"] == "error", verdict.report["steps"]
    assert "FORGED" not in json.dumps(verdict.report)


@pytest.mark.e2e
def test_an_unconfined_daemon_rewriting_step_reports_changes_nothing_the_judge_decides(
    shop: Path, tmp_path: Path
) -> None:
    """Where the machine cannot confine (sandbox: best-effort), the step contract still holds:
    the judge decides from the outcomes in memory."""
    marker, reports = tmp_path / "forged", shop / "reports"
    base = best_effort_base(shop)
    head = branch(shop, "forge-reports", plant(reports, marker), base=base)
    try:
        verdict = judge(shop, "--base", base, "--head", head, env=UNCONFINED)
        written = int(marker.read_text()) if marker.exists() else 0
    finally:
        stop(marker)
    assert written > 0, "the planted daemon never ran: the test proves nothing"
    assert verdict.returncode == 1, verdict.output
    assert verdict.report["verdict"] == "block"
    assert verdict.report["confinement"] == "unconfined"
    steps = {step["name"]: step for step in verdict.report["steps"]}
    assert steps["oracle"]["status"] == "deferred", steps["oracle"]
    assert steps["flake-budget"]["status"] == "block", steps["flake-budget"]
    assert "FORGED" not in json.dumps(verdict.report)
    summary = (reports / "judge-summary.md").read_text("utf-8")
    assert "FORGED" not in summary
    assert "**block**" in summary
    assert "unconfined" in summary
    assert "unconfined" in verdict.output


def stop(marker: Path) -> None:
    """End the planted daemon, if it ran unconfined."""
    pid_file = Path(f"{marker}.pid")
    if not pid_file.exists():
        return
    with contextlib.suppress(ProcessLookupError, ValueError):
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    time.sleep(0.1)


def a_judgment(tmp_path: Path) -> Judgment:
    """A judgment with every field set, none of them a default."""
    config = Config(
        command="shop", base_branch="main", oracle_ref="oracle/main", protected=("/oracle/",)
    )
    return Judgment(
        repo=tmp_path,
        reports=tmp_path / "reports",
        base="a" * 40,
        head="b" * 40,
        parent=tmp_path / "parent",
        patch=tmp_path / "patch",
        config=config,
        review=True,
        changes=(("M", ("src/x.py",)), ("R100", ("tests/a.py", "tests/b.py"))),
        shard=Shard(2, 3),
        builds=Builds(
            tmp_path / "p/python",
            tmp_path / "q/python",
            tmp_path / "o/python",
            Seal(tmp_path / "envs/oracle.digest.json", "c" * 64),
            beside={"replay": Seal(tmp_path / "replay-beside-build.json", "d" * 64)},
        ),
        oracle_ref=OracleRef(quarantine=tmp_path / "quarantine.yaml", unreadable=""),
        names=Names().adding(tmp_path / "parent", "base:").adding(tmp_path, "tmp:"),
    )


def a_contract(name: str, outcome: Callable[[Judgment], Outcome]) -> Contract[Judgment]:
    """A step `name` whose inputs are the judgment itself."""
    return Contract(
        name,
        argparse.ArgumentParser,
        lambda args: pytest.fail("a judge run parses no flags"),
        lambda j: j,
        lambda j, earlier: outcome(j),
        advisory=lambda j: j.config.crossrun == "advisory",
    )


def test_a_step_names_the_judgments_folders_from_its_judgment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The names travel in the judgment (to a step's process too, in its file), the longest
    path first; nothing of the environment plays a part."""
    monkeypatch.setenv("ORACLE_PATH_NAMES", json.dumps({str(tmp_path): "forged:"}))
    judgment = a_judgment(tmp_path)
    step = a_contract(
        "oracle", lambda j: Outcome(BLOCK, f"lost in {j.parent}/t.py", {"at": [str(j.repo)]})
    )
    report = step.judged(judgment, {})
    assert (report.summary, report.evidence) == ("lost in base:t.py", {"at": ["tmp:"]})
    write_judgment(tmp_path / "judgment.json", judgment, {})
    code = step.main(
        ["--judgment", str(tmp_path / "judgment.json"), "--report", str(tmp_path / "r.json")]
    )
    assert code == BLOCK
    assert read_report(tmp_path / "r.json").summary == "lost in base:t.py"


@pytest.mark.parametrize(
    ("name", "crossrun", "advisory"),
    [("oracle", "block", False), ("crossrun", "advisory", True), ("tests", "block", True)],
)
def test_a_steps_status_is_told_once_advisory_where_the_table_or_its_inputs_say(
    tmp_path: Path, name: str, crossrun: str, advisory: bool
) -> None:
    """Advisory where the step never decides (the table) or its inputs say so; a forged run
    blocks in every mode, and an error still exits 2 (a person running it learns so)."""
    config = dataclasses.replace(a_judgment(tmp_path).config, crossrun=crossrun)
    judgment = a_judgment(tmp_path).evolve(config=config)
    lost = a_contract(name, lambda j: Outcome(BLOCK, "lost", deferred_to="flake-budget")).judged(
        judgment, {}
    )
    assert (lost.status, lost.exit_code) == (
        ("advisory", PASS) if advisory else ("deferred", BLOCK)
    )
    assert lost.deferred_to == ("" if advisory else "flake-budget")
    assert lost.summary.endswith(" (deferred, advisory: never part of the verdict)") == advisory
    forged = a_contract(name, lambda j: Outcome(BLOCK, "forged", {TAMPERED: True})).judged(
        judgment, {}
    )
    assert (forged.status, forged.exit_code) == ("block", BLOCK)

    def broken(j: Judgment) -> Outcome:
        raise FailClosed("no tree")

    failed = a_contract(name, broken).judged(judgment, {})
    assert (failed.status, failed.exit_code) == ("advisory" if advisory else "error", FAIL_CLOSED)


def test_a_deferral_is_a_field_of_the_outcome_that_its_report_keeps(tmp_path: Path) -> None:
    """A step's failures that a later step decides: the status is told from the field once,
    the report file holds it where every reader of JSON looks (its evidence), and reading the
    file gives the field back, never a key left in the evidence."""
    outcome = Outcome(BLOCK, "2 of 9 lost", {"failures": []}, deferred_to="flake-budget")
    report = concluded("oracle", lambda: outcome)
    assert (report.status, report.code, report.exit_code) == ("deferred", PASS, BLOCK)
    assert report.deferred_to == "flake-budget"
    write_report(tmp_path / "oracle.json", report.payload())
    assert json.loads((tmp_path / "oracle.json").read_text())["evidence"]["deferred_to"] == (
        "flake-budget"
    )
    again = read_report(tmp_path / "oracle.json")
    assert again == report
    assert "deferred_to" not in again.evidence
    assert concluded("oracle", lambda: Outcome(BLOCK, "lost")).status == "block"


def test_a_judgment_file_gives_a_step_process_the_same_judgment(tmp_path: Path) -> None:
    judgment = a_judgment(tmp_path)
    earlier = {"oracle": Report("oracle", "deferred", 0, "2 of 9", {}, deferred_to="flake-budget")}
    write_judgment(tmp_path / "judgment.json", judgment, earlier)
    assert load_judgment(tmp_path / "judgment.json") == (judgment, earlier)


@pytest.mark.parametrize(
    "text",
    ["", "{}", "[]", '{"repo": "x"}', "not json"],
)
def test_a_file_that_is_not_a_judgment_fails_closed_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "judgment.json"
    path.write_text(text, "utf-8")
    with pytest.raises(FailClosed, match=r"judgment\.json: not a judgment file"):
        load_judgment(path)


def test_what_an_inline_step_writes_beside_its_report_goes_to_the_judgments_reports(
    tmp_path: Path,
) -> None:
    judgment = a_judgment(tmp_path)
    assert tests_step.inputs(judgment).junit == tmp_path / "reports" / "tests.xml"


def test_every_step_of_the_table_is_a_contract_that_parses_no_flags_of_its_own() -> None:
    """Each step module gives the table's step as one Contract (typed inputs from the judgment
    or from flags, one decide), and none turns values into flags for its own parser: only
    Contract.main parses, and only a person's flags."""
    for step in STEPS:
        if step.script is None:  # setup and build: the judge's own work
            continue
        module = importlib.import_module(step.module)
        contract = module.STEP
        assert isinstance(contract, Contract), step.module
        assert contract.name == step.name, step.module
        # What the table runs beside the builds is the step's to give, and only there.
        assert (contract.beside_build is not None) == step.beside_build, step.module
        assert "parse_args(" not in inspect.getsource(module), step.module
        script = importlib.import_module(step.script.removesuffix(".py"))
        assert script.STEP is contract, step.script  # the entry runs the step's own contract
        assert script.main.__code__.co_names == ("STEP", "main"), step.script
