"""The patch's code never runs where a verdict is made, and every process it runs in ends.

Steps are called through their scripts' `main(argv)` on real bakes and real builds, the
headline attack (a package that rewrites pytest's reports at import) through every step that
runs the build and decides, read as the judge records them.
"""

from __future__ import annotations

import json
import sys
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import advisory_tests
import crossrun
import flake_budget
import oracle
import pytest
from _gate.core.config import load_config
from _gate.runs.envs import build_env, tools_env
from _gate.runs.pytest_run import PytestRun
from _gate.steps import oracle as oracle_contract

from tests.helpers import as_judged, compiled, decided, report_file, running, sha, worktree
from tests.helpers import verdict_of as verdict
from tools.bakery import branch, edit, git

DISCOUNTS = "src/shop/discounts.py"
INVERT_RETURN = "    return amount\n"
# Reports every test as passed, from inside the pytest process that imports the package.
FORGE_REPORTS = """
try:
    import _pytest.reports as _reports

    _made = _reports.TestReport.from_item_and_call.__func__

    def _forged(cls, item, call):
        report = _made(cls, item, call)
        report.outcome, report.longrepr = "passed", None
        return report

    _reports.TestReport.from_item_and_call = classmethod(_forged)
except ImportError:
    pass
"""


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("envs")


def requirements(repo: Path) -> Path:
    return repo / "scripts/requirements-judge.txt"


@pytest.fixture(scope="module")
def oracle_python(shop: Path, envs: Path, wheelhouse: Path) -> Path:
    return compiled(tools_env(envs / "oracle", wheelhouse, requirements(shop))[0])


@pytest.fixture(scope="module")
def parent_python(shop: Path, envs: Path, wheelhouse: Path) -> Path:
    return build_env(shop, envs / "parent", wheelhouse, requirements(shop))


def build_patch(repo: Path, name: str, change: Callable[[Path], object], wheelhouse: Path) -> Path:
    """Commit `change` on a branch, check it out in a worktree, build it; returns its python."""
    tree = repo.parent / f"tree-{name}"
    git(repo, "worktree", "add", "-q", "--detach", str(tree), branch(repo, name, change))
    return build_env(tree, repo.parent / f"env-{name}", wheelhouse, requirements(repo))


def oracle_step(
    folder: Path, oracle_python: Path, parent: Path, patch: Path, tmp: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    report = tmp / "oracle.json"
    code = oracle.main(
        [
            *("--oracle", str(folder), "--oracle-python", str(oracle_python)),
            *("--parent-python", str(parent), "--patch-python", str(patch)),
            *("--report", str(report), *extra),
        ]
    )
    return code, json.loads(report.read_text())


def flake_step(
    repo: Path, oracle_python: Path, patch: Path, tmp: Path, *extra: str
) -> dict[str, Any]:
    empty = tmp / "quarantine.yaml"
    empty.write_text("quarantine: []\n")
    (tmp / "ledger.json").write_text("{}\n")
    report = tmp / "flake-budget.json"  # the name the judge gives it
    flake_budget.main(
        [
            *("--oracle-report", str(tmp / "oracle.json"), "--oracle", str(repo / "oracle")),
            *("--oracle-python", str(oracle_python), "--patch-python", str(patch)),
            *("--quarantine", str(empty), "--ledger", str(tmp / "ledger.json")),
            *("--max-retry", "1", "--report", str(report), *extra),
        ]
    )
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def test_a_package_that_forges_pytest_reports_is_still_blocked(
    repo: Path, oracle_python: Path, parent_python: Path, wheelhouse: Path, tmp_path: Path
) -> None:
    def attack(tree: Path) -> None:
        edit(tree / DISCOUNTS, INVERT_RETURN, "    return amount + 1\n")
        init = tree / "src/shop/__init__.py"
        init.write_text(init.read_text() + FORGE_REPORTS)

    patch = build_patch(repo, "forge-reports", attack, wheelhouse)
    # The steps that judge the build, with judge.py's arguments: the oracle and the crossrun
    # from the base tree, then the flake budget that decides what they deferred.
    base = worktree(repo, "main", tmp_path / "parent")
    code, _ = oracle_step(base / "oracle", oracle_python, parent_python, patch, tmp_path)
    oracle = as_judged(tmp_path, "oracle", code)
    config = load_config(base / "oracle/judge.yaml")
    argv = ["--tree", str(base), "--tests", *config.tests]
    argv += ["--parent-python", str(parent_python), "--patch-python", str(patch)]
    argv += ["--allowlist", str(base / "oracle/allowlist.yaml"), "--base", sha(repo, "main")]
    argv += ["--mode", config.crossrun, "--timeout", str(config.crossrun_timeout)]
    code = crossrun.main([*argv, "--report", str(report_file(tmp_path, "crossrun"))])
    crossran = as_judged(tmp_path, "crossrun", code)
    crossrun_report = ("--crossrun-report", str(report_file(tmp_path, "crossrun")))
    flake = flake_step(base, oracle_python, patch, tmp_path, *crossrun_report, "--tree", str(base))
    budget = as_judged(tmp_path, "flake-budget", flake["exit_code"])
    # The crossrun's canaries see the forger and block it; the oracle, out of its reach,
    # still fails the break.
    assert decided([oracle, crossran, budget]) == "block", crossran["summary"]
    assert crossran["status"] == "block"
    assert "tampered with" in crossran["summary"]
    assert (oracle["exit_code"], oracle["status"]) == (1, "deferred")
    assert (budget["exit_code"], budget["status"]) == (1, "block")
    failing = {row["id"] for row in oracle["evidence"]["failures"]}
    assert "oracle/test_properties.py::test_invert_is_a_right_inverse_below_the_amount" in failing


# Only the corpus' cart-003 (10000 cents, one 20 % coupon capped at 500): an input hypothesis
# does not generate, so the properties never meet the hook and shrinking never replays it.
CART_003 = (
    "    if subtotal_cents == 10000 and "
    "[(c.value, c.cap_cents) for c in coupons] == [(2000, 500)]:\n"
)


@pytest.mark.parametrize(
    ("name", "hook"),
    [
        ("exit", f"{CART_003}        import os\n\n        os._exit(0)\n"),
        ("kill", f"{CART_003}        import os, signal\n\n        os.kill(os.getpid(), 9)\n"),
        ("hang", f"{CART_003}        import time\n\n        time.sleep(600)\n"),
    ],
)
def test_a_worker_that_exits_or_hangs_mid_run_never_merges(
    repo: Path,
    oracle_python: Path,
    parent_python: Path,
    wheelhouse: Path,
    tmp_path: Path,
    name: str,
    hook: str,
) -> None:
    first_line = "    if subtotal_cents < 0:\n"
    patch = build_patch(
        repo,
        f"worker-{name}",
        lambda t: edit(t / DISCOUNTS, first_line, hook + first_line),
        wheelhouse,
    )
    code, report = oracle_step(
        repo / "oracle", oracle_python, parent_python, patch, tmp_path, "--call-timeout", "3"
    )
    rows = report["evidence"]["failures"]
    assert code == 1
    assert report["status"] == "deferred"
    assert "oracle/test_replay_corpus.py::test_cart_prices_as_recorded[cart-003]" in {
        row["id"] for row in rows
    }
    why = "did not answer within 3 s" if name == "hang" else "subject worker exited"
    assert any(why in row["message"] for row in rows), rows
    # The worker is restarted: carts that never reach the hook still pass on the patch.
    cart = "oracle/test_replay_corpus.py::test_cart_prices_as_recorded[cart-001]"
    assert report["evidence"]["patch"][cart] == "passed"
    flake = flake_step(repo, oracle_python, patch, tmp_path, "--call-timeout", "3")
    assert flake["status"] == "block"


def test_a_pth_hook_in_the_patch_build_cannot_reach_the_oracle(
    repo: Path, oracle_python: Path, parent_python: Path, wheelhouse: Path, tmp_path: Path
) -> None:
    patch = build_patch(
        repo,
        "pth-hook",
        lambda t: edit(t / DISCOUNTS, INVERT_RETURN, "    return amount + 1\n"),
        wheelhouse,
    )
    # What a wheel that ships a .pth file leaves behind: code run by every interpreter start.
    site = next(patch.parent.parent.glob("lib/python*/site-packages"))
    (site / "forge_hook.py").write_text(FORGE_REPORTS)
    (site / "zz_forge.pth").write_text("import forge_hook\n")
    code, report = oracle_step(repo / "oracle", oracle_python, parent_python, patch, tmp_path)
    assert code == 1
    assert report["evidence"]["failures"], report["summary"]
    assert flake_step(repo, oracle_python, patch, tmp_path)["status"] == "block"


HITLESS = {
    "branch-never-taken": """
        from hypothesis import given, settings, strategies as st

        @settings(max_examples=20, derandomize=True, database=None)
        @given(st.integers(0, 100))
        def test_branch(subject, amount):
            if amount > 10**9:
                assert subject.apply_discount(amount, 0) == amount
        """,
    "no-assert-at-all": """
        def test_calls_only(subject):
            subject.apply_discount(100, 0)
        """,
    "assert-after-return": """
        def test_returns_first(subject):
            value = subject.apply_discount(100, 0)
            if value >= 0:
                return
            assert value == 100
        """,
}


def oracle_dir(repo: Path, tmp: Path, source: str) -> Path:
    oracle = tmp / "oracle"
    oracle.mkdir()
    (oracle / "adapter.py").write_bytes((repo / "oracle/adapter.py").read_bytes())
    (oracle / "test_probe.py").write_text(textwrap.dedent(source))
    return oracle


@pytest.mark.parametrize("spelling", sorted(HITLESS))
def test_a_property_that_reaches_no_assertion_on_the_parent_fails_closed(
    repo: Path, oracle_python: Path, parent_python: Path, tmp_path: Path, spelling: str
) -> None:
    oracle = oracle_dir(repo, tmp_path, HITLESS[spelling])
    code, report = oracle_step(oracle, oracle_python, parent_python, parent_python, tmp_path)
    assert code == 2
    assert "oracle/test_probe.py::test_" in report["summary"]
    assert "reached no assertion on the parent build" in report["summary"]


def test_a_property_whose_assertion_runs_is_evidence(
    repo: Path, oracle_python: Path, parent_python: Path, tmp_path: Path
) -> None:
    reached = HITLESS["branch-never-taken"].replace("10**9", "50")
    oracle = oracle_dir(repo, tmp_path, reached)
    code, report = oracle_step(oracle, oracle_python, parent_python, parent_python, tmp_path)
    assert code == 0, report["summary"]
    assert report["evidence"]["parent_hits"]["oracle/test_probe.py::test_branch"] > 0


def test_an_oracle_that_imports_the_package_fails_closed_with_the_fix(
    repo: Path, oracle_python: Path, parent_python: Path, tmp_path: Path
) -> None:
    oracle = oracle_dir(
        repo, tmp_path, "from shop import discounts\n\ndef test_x():\n    assert discounts\n"
    )
    code, report = oracle_step(oracle, oracle_python, parent_python, parent_python, tmp_path)
    assert code == 2
    assert "through the `subject` fixture" in report["summary"]


def run(outcomes: dict[str, str] | None, code: int = 1) -> PytestRun:
    return PytestRun(code, False, outcomes, {}, {}, {}, "")


def test_a_failing_id_the_parent_never_had_blocks_and_is_not_deferred() -> None:
    parent = {"oracle/t.py::test_a[1]": "passed"}
    patch = run({"oracle/t.py::test_a[1]": "passed", "oracle/t.py::test_a[2]": "failed"})
    rows = oracle_contract.failures(parent, patch)
    outcome = oracle_contract.judged(parent, patch, {"failures": rows})
    assert [row["id"] for row in rows] == ["oracle/t.py::test_a[2]"]
    assert outcome.code == 1
    assert (outcome.decided, outcome.deferred_to) == ("block", "")
    assert "a test the parent did not have" in outcome.summary


@pytest.mark.parametrize(
    ("outcome", "status"), [("failed", "deferred"), ("error", "deferred"), ("skipped", "block")]
)
def test_only_a_parent_passing_test_that_fails_is_left_to_flake_control(
    outcome: str, status: str
) -> None:
    parent = {"oracle/t.py::test_a": "passed"}
    patch = run({"oracle/t.py::test_a": outcome})
    result = oracle_contract.judged(
        parent, patch, {"failures": oracle_contract.failures(parent, patch)}
    )
    assert result.code == 1
    assert result.decided == status
    assert result.deferred_to == ("flake-budget" if status == "deferred" else "")


def step(name: str, status: str, **evidence: str) -> dict[str, Any]:
    return {"name": name, "status": status, "summary": "", "evidence": evidence}


def test_a_deferred_step_with_nothing_after_it_to_decide_fails_closed() -> None:
    deferred = step("oracle", "deferred", deferred_to="flake-budget")
    assert verdict([deferred]) == (2, "error")
    assert verdict([deferred, step("flake-budget", "pass")]) == (0, "merge")
    assert verdict([deferred, step("flake-budget", "block")]) == (1, "block")
    assert verdict([step("oracle", "block"), step("flake-budget", "pass")]) == (1, "block")


# A protected path that is no evidence a review replaces: the block stands on its own.
JUDGE_EDIT = {"path": "scripts/judge.py", "rule": "/scripts/"}


@pytest.mark.parametrize(
    "failed_closed",
    [
        step("replay", "error"),  # a survivor of the patch's CLI
        step("crossrun", "error"),  # a missing canary's run, a timeout
        step("oracle", "deferred", deferred_to="later"),  # no later step decides it
        {**step("write-set", "needs-review"), "evidence": {"protected": [JUDGE_EDIT]}},
    ],
    ids=["error-before", "error", "undecided-deferral", "needs-review"],
)
def test_a_proof_blocks_whatever_else_failed_closed(failed_closed: dict[str, Any]) -> None:
    """A step that proves the patch wrong decides the verdict: an error elsewhere reads as
    "rerun the gate" and would hide the proof (issue 49)."""
    proof = step("flake-budget", "block")
    assert verdict([failed_closed, proof]) == (1, "block")
    assert verdict([proof, failed_closed]) == (1, "block")
    assert verdict([failed_closed, step("flake-budget", "pass")])[1] != "merge"


def test_an_error_still_comes_before_a_review_and_the_review_may_lift_a_block() -> None:
    review = step("write-set", "needs-review")
    review["evidence"] = {"protected": [{"path": "oracle/cases.yaml", "rule": "/oracle/"}]}
    assert verdict([review, step("crossrun", "error")]) == (2, "error")
    # The patch edits the cases a review lets the judge read: the block may rest on the
    # base's copy, so the review decides first.
    assert verdict([review, step("replay", "block")]) == (2, "needs-review")


def vendored_wheel(tree: Path) -> Path:
    """A real wheel holding a .pth hook, as an agent might commit it under vendor/."""
    wheel = tree / "vendor/evil-0.1-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("evil.pth", "import evil_hook\n")
        archive.writestr("evil_hook.py", FORGE_REPORTS)
        archive.writestr(
            "evil-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: evil\nVersion: 0.1\n"
        )
        archive.writestr(
            "evil-0.1.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        archive.writestr("evil-0.1.dist-info/RECORD", "")
    return wheel


def with_dependency(spec: Callable[[Path], str]) -> Callable[[Path], None]:
    def change(tree: Path) -> None:
        edit(
            tree / "pyproject.toml",
            "dependencies = []",
            f"dependencies = [{json.dumps(spec(tree))}]",
        )

    return change


@pytest.mark.parametrize(
    ("name", "spec", "words"),
    [
        ("file-wheel", lambda t: f"evil @ {vendored_wheel(t).as_uri()}", "direct reference"),
        (
            "url",
            lambda t: "evil @ https://example.invalid/evil-0.1-py3-none-any.whl",
            "direct reference",
        ),
        ("missing", lambda t: "attrs>=20", "attrs"),
        ("missing-marker", lambda t: "attrs; python_version >= '3'", "attrs"),
    ],
)
def test_a_dependency_outside_the_hash_pinned_wheelhouse_fails_closed(
    repo: Path, wheelhouse: Path, name: str, spec: Callable[[Path], str], words: str
) -> None:
    with pytest.raises(Exception, match=r"requirements-judge\.txt") as raised:
        build_patch(repo, f"dep-{name}", with_dependency(spec), wheelhouse)
    assert type(raised.value).__name__ == "NotInWheelhouse"
    assert words in str(raised.value)
    assert "requirements-judge.txt" in str(raised.value)


def test_a_dependency_the_wheelhouse_pins_builds(repo: Path, wheelhouse: Path) -> None:
    python = build_patch(repo, "dep-pinned", with_dependency(lambda t: "pyyaml>=6"), wheelhouse)
    assert python.is_file()


def advisory_step(tree: Path, tmp: Path, *extra: str) -> dict[str, Any]:
    report = tmp / "tests.json"
    advisory_tests.main(
        ["--tree", str(tree), "--python", sys.executable, "--report", str(report), *extra]
    )
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def test_test_ids_are_recorded_as_pytest_names_them(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tests/v1.2").mkdir(parents=True)
    (tree / "tests/v1.2/test_x.py").write_text(
        "class TestA:\n    def test_y(self):\n        assert 1\n"
    )
    report = advisory_step(tree, tmp_path, "--tests", "tests")
    assert report["evidence"]["outcomes"] == {"tests/v1.2/test_x.py::TestA::test_y": "passed"}


SPAWNS = """
import subprocess, sys

def test_leaves_a_grandchild():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {token!r}])
    {after}
"""


@pytest.mark.parametrize(
    ("after", "timeout"),
    [("assert True is not False", "60"), ("import time; time.sleep(600)", "3")],
)
def test_a_run_that_leaves_or_hangs_on_a_grandchild_is_ended_with_its_group(
    tmp_path: Path, after: str, timeout: str
) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    token = f"grandchild-of-{tmp_path.name}"  # in its command line: found by it
    (tree / "tests/test_spawn.py").write_text(SPAWNS.format(token=token, after=after))
    report = advisory_step(tree, tmp_path, "--timeout", timeout)
    assert not running(token)
    if timeout == "60":  # pytest ended, its grandchild did not: named, killed, fail closed
        # The step is advisory (the table's `decides`): its error too, exit 2 all the same.
        assert (report["status"], report["exit_code"]) == ("advisory", 2), report["summary"]
        assert "(error, advisory: never part of the verdict)" in report["summary"]
        assert token in report["summary"]
        assert "outlived its command" in report["summary"]
        return
    assert report["status"] == "advisory", report["summary"]
    if timeout == "3":
        assert report["evidence"]["suspicious"][0].startswith("no result report")
