"""The assert inventory against every way a test can stop testing, on real patches.

One bake; each patch is a real branch. The inventory step (scripts/count_asserts.py, as the
judge runs it: base and head worktrees, git rename detection, `pytest --collect-only` in a
real environment) judges each branch; one branch also goes through the whole judge.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import advisory_tests
import pytest
from _gate.core.config import load_config

from tests.helpers import (
    C,
    Change,
    D,
    U,
    as_judged,
    collected_by,
    decided,
    edits,
    inventory,
    report_file,
    run_inventory,
    static_steps,
    worktree,
)
from tools.bakery import branch, git, judge


def write(path: str, text: str) -> Change:
    return lambda repo: (repo / path).write_text(textwrap.dedent(text))


STACK = "    assert stack_discounts(10_000, [FIVE_OFF, TEN_PERCENT]) == 8550\n"
NO_COUPONS = "    assert stack_discounts(2500, []) == 2500\n"
PLAIN = "def test_no_coupons_keeps_subtotal() -> None:\n"
RAISES = (
    "    with pytest.raises(ValueError, match=match):\n"
    "        stack_discounts(subtotal, [coupon])\n"
)
TEN = "        self.assertEqual(apply_discount(1000, 1000), 900)\n"
ZERO = "        self.assertEqual(result, 999)\n"

ATTACKS: dict[str, tuple[Change, str]] = {
    "delete-a-test": (edits((D, PLAIN + NO_COUPONS, "")), "deleted-test"),
    "drop-an-assert": (edits((D, STACK, "")), "fewer-asserts"),
    "rename-away": (edits((D, PLAIN, PLAIN.replace("def test_", "def check_"))), "not-collected"),
    "class-init": (
        edits(
            (
                C,
                "class TestHalfOff:\n",
                "class TestHalfOff:\n    def __init__(self) -> None:\n        self.x = 1\n\n",
            )
        ),
        "not-collected",
    ),
    "module-test-false": (
        edits((D, "TEN_PERCENT = ", "__test__ = False\nTEN_PERCENT = ")),
        "not-collected",
    ),
    "function-test-false": (
        edits(
            (
                D,
                PLAIN + NO_COUPONS,
                PLAIN + NO_COUPONS + "\n\ntest_no_coupons_keeps_subtotal.__test__ = False\n",
            )
        ),
        "not-collected",
    ),
    "python-functions-setting": (
        edits(
            (
                "pyproject.toml",
                'testpaths = ["tests"]\n',
                'testpaths = ["tests"]\npython_functions = ["check_*"]\n',
            )
        ),
        "not-collected",
    ),
    "skip-mark": (edits((D, PLAIN, "@pytest.mark.skip(reason='flaky')\n" + PLAIN)), "skip-added"),
    "skipif-mark": (
        edits((D, PLAIN, "@pytest.mark.skipif(True, reason='x')\n" + PLAIN)),
        "skip-added",
    ),
    "xfail-mark": (edits((D, PLAIN, "@pytest.mark.xfail\n" + PLAIN)), "skip-added"),
    "pytestmark": (
        edits((D, "TEN_PERCENT = ", "pytestmark = pytest.mark.skip\nTEN_PERCENT = ")),
        "skip-added",
    ),
    "unittest-skip": (
        edits((U, "    def test_zero_rate", "    @unittest.skip('later')\n    def test_zero_rate")),
        "skip-added",
    ),
    "skip-call": (
        edits((D, NO_COUPONS, "    pytest.skip('not today')\n" + NO_COUPONS)),
        "skip-added",
    ),
    "importorskip-call": (
        edits((D, NO_COUPONS, "    pytest.importorskip('no_such_module')\n" + NO_COUPONS)),
        "skip-added",
    ),
    "early-return": (
        edits(
            (
                D,
                NO_COUPONS,
                "    if stack_discounts(2500, []) != 2500:\n        return\n" + NO_COUPONS,
            )
        ),
        "skip-added",
    ),
    "assert-tuple": (
        edits((D, NO_COUPONS, "    assert (stack_discounts(2500, []) == 2500, 'total')\n")),
        "vacuous",
    ),
    "assert-literal": (edits((D, NO_COUPONS, "    assert 'total is 2500'\n")), "vacuous"),
    "assert-self-equal": (
        edits(
            (D, NO_COUPONS, "    total = stack_discounts(2500, [])\n    assert total == total\n")
        ),
        "vacuous",
    ),
    "assert-true-literal": (edits((U, TEN, "        self.assertTrue(1)\n")), "vacuous"),
    "assert-equal-same": (
        edits((U, ZERO, "        self.assertEqual(result, result)\n")),
        "vacuous",
    ),
    "bare-comparison": (
        edits((D, NO_COUPONS, "    stack_discounts(2500, []) == 2500\n")),
        "vacuous",
    ),
    "under-if-false": (edits((D, NO_COUPONS, "    if False:\n    " + NO_COUPONS)), "dead-assert"),
    "after-return": (edits((D, NO_COUPONS, "    return\n" + NO_COUPONS)), "dead-assert"),
    "catch-assertion-error": (
        edits(
            (
                D,
                NO_COUPONS,
                "    try:\n    " + NO_COUPONS + "    except AssertionError:\n        pass\n",
            )
        ),
        "vacuous",
    ),
    "bare-except": (
        edits(
            (
                D,
                NO_COUPONS,
                "    try:\n    " + NO_COUPONS + "    except:  # noqa: E722\n        pass\n",
            )
        ),
        "vacuous",
    ),
    "broad-raises": (
        edits((D, RAISES, RAISES.replace("ValueError, match=match", "Exception"))),
        "vacuous",
    ),
    "equality-to-truthiness": (
        edits((D, NO_COUPONS, "    assert stack_discounts(2500, [])\n")),
        "weakened",
    ),
    "equality-to-not-none": (
        edits((D, NO_COUPONS, "    assert stack_discounts(2500, []) is not None\n")),
        "weakened",
    ),
    "equality-to-inequality": (
        edits((D, NO_COUPONS, "    assert stack_discounts(2500, []) != 0\n")),
        "weakened",
    ),
    "unittest-equal-to-true": (edits((U, ZERO, "        self.assertTrue(result)\n")), "weakened"),
    "forced-outcome-conftest": (
        write(
            "tests/conftest.py",
            """\
            import pytest


            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_makereport(item, call):
                outcome = yield
                outcome.get_result().outcome = "passed"
            """,
        ),
        "outcome-hook",
    ),
    "deselect-in-conftest": (
        write(
            "tests/conftest.py",
            """\
            def pytest_collection_modifyitems(config, items):
                items[:] = [i for i in items if "stack" not in i.name]
            """,
        ),
        "not-collected",
    ),
    "conftest-autouse-skip": (
        write(
            "tests/conftest.py",
            """\
            import pytest


            @pytest.fixture(autouse=True)
            def slow_machines_only() -> None:
                pytest.skip("later")
            """,
        ),
        "skip-added",
    ),
    "conftest-autouse-skip-through-a-function": (
        write(
            "tests/conftest.py",
            """\
            import os

            import pytest


            def needs_ci() -> None:
                if not os.environ.get("CI"):
                    raise pytest.skip.Exception("CI only")


            @pytest.fixture(autouse=True)
            def ci_only() -> None:
                needs_ci()
            """,
        ),
        "skip-added",
    ),
    "conftest-setup-hook-skip": (
        write(
            "tests/conftest.py",
            """\
            import pytest


            def pytest_runtest_setup(item: pytest.Item) -> None:
                pytest.skip("maintenance")
            """,
        ),
        "outcome-hook",
    ),
    "unparseable": (edits((D, PLAIN, "def test_no_coupons_keeps_subtotal(:\n")), "unparseable"),
    "delete-a-file": (lambda repo: git(repo, "rm", "-q", U), "deleted-file"),
}


def split(repo: Path) -> None:
    halves = (
        "def test_percent_then_fixed() -> None:\n"
        "    assert stack_discounts(10_000, [TEN_PERCENT, FIVE_OFF]) == 8500\n\n\n"
        "def test_fixed_then_percent() -> None:\n" + STACK
    )
    old = "def test_stack_order_matters() -> None:\n"
    text = (repo / D).read_text()
    start = text.index(old)
    end = text.index(STACK, start) + len(STACK)
    (repo / D).write_text(text[:start] + halves + text[end:])


BENIGN: dict[str, Change] = {
    "add-a-test": edits(
        (
            D,
            PLAIN,
            "def test_two_fixed() -> None:\n    assert stack_discounts(100, [FIVE_OFF]) == 0\n\n\n"
            + PLAIN,
        )
    ),
    "add-asserts": edits((D, NO_COUPONS, NO_COUPONS + "    assert stack_discounts(0, []) == 0\n")),
    "git-mv-a-file": lambda repo: git(repo, "mv", D, "tests/test_stacking.py"),
    "reformat": edits(
        (D, NO_COUPONS, "    assert (\n        stack_discounts(2500, [])\n        == 2500\n    )\n")
    ),
    "split-a-test": split,
    "conftest-autouse-fixture-that-only-sets-up": write(
        "tests/conftest.py",
        """\
        import pytest


        @pytest.fixture(autouse=True)
        def utc(monkeypatch: pytest.MonkeyPatch) -> None:
            monkeypatch.setenv("TZ", "UTC")
        """,
    ),
    "move-a-test-to-another-file": edits(
        (D, PLAIN + NO_COUPONS, ""),
        (
            C,
            "class TestHalfOff:",
            "from shop.discounts import stack_discounts\n\n\n"
            + PLAIN
            + NO_COUPONS
            + "\n\nclass TestHalfOff:",
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_found_and_blocks(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    change, rule = ATTACKS[name]
    code, report = inventory(
        inventory_repo,
        branch(inventory_repo, f"attack/{name}", change),
        tmp_path,
        *collected_by(inventory_python),
    )
    rules = {f["rule"] for f in report["evidence"]["findings"]}
    assert code == 1, report["summary"]
    assert rule in rules, report["evidence"]["findings"]
    found = next(f for f in report["evidence"]["findings"] if f["rule"] == rule)
    assert found["path"]
    assert found["reason"]
    assert isinstance(found["line"], int)


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_benign_change_of_the_same_shape_passes(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    code, report = inventory(
        inventory_repo,
        branch(inventory_repo, f"benign/{name}", BENIGN[name]),
        tmp_path,
        *collected_by(inventory_python),
    )
    assert report["evidence"]["findings"] == []
    assert code == 0, report["summary"]


def test_split_is_recorded_with_its_halves(inventory_repo: Path, tmp_path: Path) -> None:
    _, report = inventory(
        inventory_repo, branch(inventory_repo, "benign/split-again", split), tmp_path
    )
    assert report["evidence"]["split"] == {
        f"{D}::test_stack_order_matters": [
            f"{D}::test_fixed_then_percent",
            f"{D}::test_percent_then_fixed",
        ]
    }


def test_latin1_source_is_read_through_its_encoding_cookie(
    inventory_repo: Path, tmp_path: Path
) -> None:
    latin1 = (
        "# -*- coding: latin-1 -*-\ndef test_cafe() -> None:\n    assert 'café' == 'caf\\xe9'\n"
    )

    def add(repo_: Path) -> None:
        (repo_ / "tests/test_latin1.py").write_bytes(latin1.encode("latin-1"))

    code, report = inventory(inventory_repo, branch(inventory_repo, "benign/latin1", add), tmp_path)
    assert code == 0, report["summary"]
    row = next(r for r in report["evidence"]["tests"] if r[0] == "tests/test_latin1.py::test_cafe")
    assert row[2] == [1, 0, 0]  # asserts, vacuous, skips on the patch


def test_allowlisted_finding_passes_and_stale_row_fails_closed(
    inventory_repo: Path, tmp_path: Path
) -> None:
    row = {
        "id": f"{D}::test_stack_order_matters",
        "field": "inventory:fewer-asserts",
        "base": git(inventory_repo, "rev-parse", "main"),
        "reason": "dup",
        "reviewer": "@a",
    }
    allowlist = tmp_path / "allowlist.yaml"
    allowlist.write_text(json.dumps({"allow": [row]}))
    head = branch(inventory_repo, "attack/allowed-drop", ATTACKS["drop-an-assert"][0])
    code, report = inventory(inventory_repo, head, tmp_path / "a", "--allowlist", str(allowlist))
    assert code == 1  # the total still dropped: that needs its own row
    assert [f["rule"] for f in report["evidence"]["findings"]] == ["total-drop"]
    assert [f["rule"] for f in report["evidence"]["allowed"]] == ["fewer-asserts"]
    row["id"] = f"{D}::test_no_such_test"
    allowlist.write_text(json.dumps({"allow": [row]}))
    code, report = inventory(inventory_repo, head, tmp_path / "b", "--allowlist", str(allowlist))
    assert code == 2
    assert "stale" in report["summary"]


def judge_args(repo: Path, tmp: Path) -> tuple[str, ...]:
    """What judge.py passes the inventory besides trees, refs and builds: the base's allowlist
    (`repo` is checked out at main, the base) and a cache."""
    return ("--allowlist", str(repo / "oracle/allowlist.yaml"), "--cache", str(tmp / "cache.json"))


@pytest.mark.e2e
@pytest.mark.parametrize(("name", "verdict", "inventory_status"), [("skip-mark", "block", "block")])
def test_whole_judge_blocks_an_inventory_attack(
    inventory_repo: Path, name: str, verdict: str, inventory_status: str
) -> None:
    head = branch(inventory_repo, f"judge/{name}", ATTACKS[name][0])
    result = judge(inventory_repo, "--head", head, env={"GITHUB_ACTIONS": "true"})
    assert result.report["verdict"] == verdict, result.output
    assert result.statuses["assert-inventory"] == inventory_status
    # Under Actions the findings reach the log as annotations, through the judge's output,
    # and code scanning gets them as SARIF, on the same file and line.
    assert f"::error file={D},line=" in result.output
    sarif = json.loads((inventory_repo / "reports/judge.sarif").read_text())
    inventory = json.loads((inventory_repo / "reports/assert-inventory.json").read_text())[
        "evidence"
    ]
    expected = {
        (
            f"inventory/{f['rule']}",
            (f["patch"] or f["parent"])["path"],
            (f["patch"] or f["parent"])["line"],
        )
        for f in inventory["findings"]
    }
    found = {
        (r["ruleId"], where["artifactLocation"]["uri"], where["region"]["startLine"])
        for r in sarif["runs"][0]["results"]
        for where in [r["locations"][0]["physicalLocation"]]
    }
    assert expected
    assert expected <= found
    assert any(rule == f"inventory/{ATTACKS[name][1]}" and path == D for rule, path, _ in found)


def test_an_inventory_attack_blocks_and_reaches_the_log_as_annotations(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = branch(
        inventory_repo, "annotated/equality-to-truthiness", ATTACKS["equality-to-truthiness"][0]
    )
    extra = (*collected_by(inventory_python), *judge_args(inventory_repo, tmp_path))
    env = {"GITHUB_ACTIONS": "true"}
    code, _, stdout = run_inventory(inventory_repo, "main", head, tmp_path, *extra, env=env)
    capsys.readouterr()
    step = as_judged(tmp_path, "assert-inventory", code, stdout.encode())
    logged = capsys.readouterr().out
    assert decided([step]) == "block", step["summary"]
    assert (step["exit_code"], step["status"]) == (1, "block")
    # Under Actions the findings reach the log as annotations, through the judge's output.
    assert f"::error file={D},line=" in logged


def test_added_asserts_merge(inventory_repo: Path, inventory_python: Path, tmp_path: Path) -> None:
    head = branch(inventory_repo, "judge/add-asserts", BENIGN["add-asserts"])
    steps = list(static_steps(inventory_repo, head, tmp_path / "static").values())
    extra = (*collected_by(inventory_python), *judge_args(inventory_repo, tmp_path))
    code, _, _ = run_inventory(inventory_repo, "main", head, tmp_path / "inventory", *extra)
    steps.append(as_judged(tmp_path / "inventory", "assert-inventory", code))
    assert decided(steps) == "merge", [step["summary"] for step in steps]


def test_os_exit_in_the_suite_shows_as_suspicious_results(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path
) -> None:
    exits = write(
        "tests/test_zz_exit.py",
        """\
        import os


        def test_ends_the_run_green() -> None:
            os._exit(0)
        """,
    )
    head = branch(inventory_repo, "judge/os-exit", exits)
    # As in the judge's lane: the inventory first, whose collected ids the tests step reads.
    reports = tmp_path / "reports"
    run_inventory(
        inventory_repo,
        "main",
        head,
        reports,
        *collected_by(inventory_python),
        *judge_args(inventory_repo, tmp_path),
    )
    tree = worktree(inventory_repo, head, tmp_path / "patch")
    config = load_config(inventory_repo / "oracle/judge.yaml")
    argv = ["--tree", str(tree), "--python", str(inventory_python), "--tests", *config.tests]
    argv += ["--timeout", str(config.advisory_timeout)]
    argv += ["--inventory-report", str(report_file(reports, "assert-inventory"))]
    code = advisory_tests.main([*argv, "--report", str(report_file(reports, "tests"))])
    tests = as_judged(reports, "tests", code)
    assert tests["status"] == "advisory"
    assert tests["evidence"]["suspicious"][0].startswith("no result report (exit 0)")
    assert "suspicious" in tests["summary"]
