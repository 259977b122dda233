"""The assert inventory against what pytest collects, on real patches of a real bake.

Collected ids are accounted one by one (parameters kept); a patch may add test paths; tests in
files the `python_files` names miss are inventoried from the collected ids; a pytest plugin
the patch loads through configuration is an outcome hook; findings become GitHub annotations.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _gate.runs.collect import annotation, collection_key
from _gate.runs.envs import tools_env

from tests.helpers import Change, collected_by, edits, run_inventory
from tools.bakery import branch, edit, git

D = "tests/test_discounts.py"
CLI = "tests/test_cli.py"
BPS_OVER = '        (100, 10_001, "bps"),\n'
FROBNICATE = '        ["order", "frobnicate"],\n'
TESTPATHS = 'testpaths = ["tests"]\n'
PLUGIN = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
ROOT_TESTS = """\
import pytest

from shop.discounts import stack_discounts


def test_no_coupons() -> None:
    assert stack_discounts(2400, []) == 2400


def test_zero_subtotal() -> None:
    assert stack_discounts(0, []) == 0
    assert stack_discounts(0, []) >= 0


@pytest.mark.parametrize("cents", [1, 10, 100], ids=["one", "ten", "hundred"])
def test_keeps_subtotal(cents: int) -> None:
    assert stack_discounts(cents, []) == cents
"""


def rules_of(report: dict[str, Any]) -> set[str]:
    return {f["rule"] for f in report["evidence"]["findings"]}


def write(path: str, text: str) -> Change:
    def change(repo_: Path) -> None:
        (repo_ / path).parent.mkdir(parents=True, exist_ok=True)
        (repo_ / path).write_text(textwrap.dedent(text))

    return change


def pyproject(old: str, new: str) -> Change:
    return edits(("pyproject.toml", old, new))


def both(*changes: Change) -> Change:
    def change(repo_: Path) -> None:
        for one in changes:
            one(repo_)

    return change


def plugin_module_and(*changes: Change) -> Change:
    """The plugin module at the root (importable from the tree), plus how it is loaded."""
    return both(write("qa_support.py", PLUGIN), *changes)


def append(path: str, text: str) -> Change:
    def change(repo_: Path) -> None:
        with (repo_ / path).open("a", encoding="utf-8") as handle:
            handle.write(textwrap.dedent(text))

    return change


# --- 1: collected ids that disappear ---------------------------------------------------------

DROPPED: dict[str, Change] = {
    "drop-a-parametrize-row": edits((D, BPS_OVER, ""), (D, '"bps-over", ', "")),
    "drop-a-row-of-another-test": edits((CLI, FROBNICATE, ""), (CLI, '"unknown-action", ', "")),
    "deselect-one-id-in-addopts": pyproject(
        TESTPATHS,
        TESTPATHS
        + 'addopts = ["--deselect", "tests/test_cli.py::test_usage_errors_exit_2[no-json]"]\n',
    ),
}


@pytest.mark.parametrize("name", sorted(DROPPED))
def test_a_collected_id_that_disappears_blocks(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    head = branch(inventory_repo, f"collect/{name}", DROPPED[name])
    code, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python)
    )
    assert code == 1, report["summary"]
    lost = [f for f in report["evidence"]["findings"] if f["rule"] == "not-collected"]
    assert len(lost) == 1, report["evidence"]["findings"]
    assert "[" in lost[0]["id"]
    assert lost[0]["id"] in lost[0]["reason"]
    collection = report["evidence"]["collection"]
    assert collection["parent"] == collection["patch"] + 1


def test_the_finding_names_the_id_with_its_parameter(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path
) -> None:
    head = branch(inventory_repo, "collect/named-row", DROPPED["drop-a-parametrize-row"])
    _, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python)
    )
    (found,) = report["evidence"]["findings"]
    assert found["id"] == f"{D}::test_invert_discount_rejects_impossible_input[bps-over]"
    assert found["path"] == D
    assert found["line"] > 0
    assert found["parent"]["path"] == D
    assert found["patch"]["path"] == D
    # The dropped row sat above the function: it starts a line higher on the patch.
    assert found["parent"]["line"] == found["patch"]["line"] + 1 == found["line"] + 1


MAPPED: dict[str, Change] = {
    "git-mv-a-parametrized-file": lambda r: git(r, "mv", CLI, "tests/test_cli_usage.py"),
    "move-a-parametrized-test-by-body": edits(
        (D, "def test_invert_discount_rejects_impossible_input", "def _unused"),
        (
            D,
            "        invert_discount(discounted, bps)\n",
            "        invert_discount(discounted, bps)\n\n\n"
            + "class TestInvert:\n"
            + "    @pytest.mark.parametrize(\n"
            + '        ("discounted", "bps", "match"),\n'
            + '        [(-1, 1000, "discounted_cents"), (100, -1, "bps"), (100, 10_001, "bps"),\n'
            + '         (5, 10_000, "100 %")],\n'
            + '        ids=["negative-amount", "bps-under", "bps-over", "full-discount-nonzero"],\n'
            + "    )\n"
            + "    def test_rejects(self, discounted: int, bps: int, match: str) -> None:\n"
            + "        with pytest.raises(ValueError, match=match):\n"
            + "            invert_discount(discounted, bps)\n",
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(MAPPED))
def test_moved_ids_are_followed(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    head = branch(inventory_repo, f"collect/{name}", MAPPED[name])
    code, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python)
    )
    assert report["evidence"]["findings"] == []
    assert code == 0, report["summary"]


# --- 2: new test paths merge ----------------------------------------------------------------

EXTRA_TEST = """\
from shop.discounts import stack_discounts


def test_extra_zero() -> None:
    assert stack_discounts(0, []) == 0
"""
NEW_PATHS: dict[str, Change] = {
    "add-a-testpath": both(
        write("checks/test_extra.py", EXTRA_TEST),
        pyproject(TESTPATHS, 'testpaths = ["tests", "checks"]\n'),
    ),
    "add-python-files": both(
        write("tests/check_extra.py", EXTRA_TEST),
        pyproject(TESTPATHS, TESTPATHS + 'python_files = ["test_*.py", "check_*.py"]\n'),
    ),
}


@pytest.mark.parametrize("name", sorted(NEW_PATHS))
def test_new_test_paths_merge(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    head = branch(inventory_repo, f"collect/{name}", NEW_PATHS[name])
    code, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python)
    )
    assert report["evidence"]["findings"] == []
    assert code == 0, report["summary"]
    collection = report["evidence"]["collection"]
    assert collection["patch"] == collection["parent"] + 1
    rows = {row[0]: row for row in report["evidence"]["tests"]}
    extra = next(test for test in rows if test.endswith("::test_extra_zero"))
    assert rows[extra][1] is None
    assert rows[extra][2] == [1, 0, 0]


# --- 3: tests the `python_files` names miss ---------------------------------------------------


def python_files_layout(repo_: Path) -> None:
    (repo_ / "test.py").write_text(ROOT_TESTS)
    edit(
        repo_ / "pyproject.toml",
        TESTPATHS,
        'testpaths = ["tests", "test.py"]\npython_files = ["test_*.py", "test.py"]\n',
    )


def judge_yaml_layout(repo_: Path) -> None:
    (repo_ / "test.py").write_text(ROOT_TESTS)
    edit(repo_ / "oracle/judge.yaml", "tests: [tests]\n", "tests: [tests, test.py]\n")


@pytest.fixture(scope="module")
def layouts(inventory_repo: Path) -> dict[str, str]:
    """Bases whose root test.py pytest collects: through its config, or named in judge.yaml."""
    return {
        "python-files": branch(inventory_repo, "layout/python-files", python_files_layout),
        "judge-yaml": branch(inventory_repo, "layout/judge-yaml", judge_yaml_layout),
    }


ROOT_ATTACKS: dict[str, tuple[Change, str]] = {
    "delete-a-root-test": (
        edits(("test.py", "def test_no_coupons() -> None:\n", "def _no_coupons() -> None:\n")),
        "not-collected",
    ),
    "drop-a-root-assert": (
        edits(("test.py", "    assert stack_discounts(0, []) >= 0\n", "")),
        "fewer-asserts",
    ),
    "weaken-a-root-assert": (
        edits(
            (
                "test.py",
                "    assert stack_discounts(2400, []) == 2400\n",
                "    assert stack_discounts(2400, [])\n",
            )
        ),
        "weakened",
    ),
    "drop-a-root-row": (
        edits(
            (
                "test.py",
                '[1, 10, 100], ids=["one", "ten", "hundred"]',
                '[1, 10], ids=["one", "ten"]',
            )
        ),
        "not-collected",
    ),
}


@pytest.mark.parametrize("layout", ["python-files", "judge-yaml"])
def test_root_test_file_is_inventoried(
    inventory_repo: Path,
    inventory_python: Path,
    tmp_path: Path,
    layouts: dict[str, str],
    layout: str,
) -> None:
    base = layouts[layout]
    code, report, _ = run_inventory(
        inventory_repo, base, base, tmp_path, *collected_by(inventory_python)
    )
    assert code == 0, report["summary"]
    root = [row for row in report["evidence"]["tests"] if row[0].startswith("test.py::")]
    assert sorted(row[0] for row in root) == [
        "test.py::test_keeps_subtotal",
        "test.py::test_no_coupons",
        "test.py::test_zero_subtotal",
    ]
    assert sum(row[1][0] for row in root) == 4


@pytest.mark.parametrize("layout", ["python-files", "judge-yaml"])
@pytest.mark.parametrize("name", sorted(ROOT_ATTACKS))
def test_attack_on_a_root_test_file_blocks(
    inventory_repo: Path,
    inventory_python: Path,
    tmp_path: Path,
    layouts: dict[str, str],
    layout: str,
    name: str,
) -> None:
    change, rule = ROOT_ATTACKS[name]
    base = layouts[layout]
    head = branch(inventory_repo, f"root/{layout}/{name}", change, base=base)
    code, report, _ = run_inventory(
        inventory_repo, base, head, tmp_path, *collected_by(inventory_python)
    )
    assert code == 1, report["summary"]
    assert rule in rules_of(report), report["evidence"]["findings"]
    found = next(f for f in report["evidence"]["findings"] if f["rule"] == rule)
    assert found["path"] == "test.py"


HIDDEN: dict[str, Change] = {
    "test-bound-by-assignment": append(
        D,
        """\


        def _hidden() -> None:
            assert stack_discounts(2500, []) == 2500


        test_hidden = _hidden
        """,
    ),
    "test-inherited-from-another-file": lambda r: (
        (r / "tests/bases.py").write_text(
            "class Base:\n    def test_inherited(self) -> None:\n        assert 1 + 1 == 2\n"
        ),
        (r / "tests/test_derived.py").write_text(
            "from tests.bases import Base\n\n\nclass TestDerived(Base):\n    pass\n"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_a_collected_test_the_inventory_cannot_see_fails_closed(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    head = branch(inventory_repo, f"collect/{name}", HIDDEN[name])
    code, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python)
    )
    assert code == 2, report["summary"]
    assert "\n" not in report["summary"]
    expected = {
        "test-bound-by-assignment": f"{D}::test_hidden",
        "test-inherited-from-another-file": "tests/test_derived.py::TestDerived::test_inherited",
    }[name]
    assert expected in report["summary"]


# Tests a test class inherits from a base of its own file that pytest does not collect alone:
# pytest collects each under every subclass (more-itertools' `PeekableMixinTests`).
MIXED_IN = {
    "unittest-mixin": (
        "class CheckMixin:\n    def test_stacks(self) -> None:\n"
        "        assert stack_discounts(100, []) == 100\n\n\n"
        "class Plain(CheckMixin, unittest.TestCase):\n    pass\n\n\n"
        "class Twice(CheckMixin, unittest.TestCase):\n    pass\n"
    ),
    "pytest-mixin-of-a-mixin": (
        "class Inner:\n    def test_stacks(self) -> None:\n"
        "        assert stack_discounts(100, []) == 100\n\n\n"
        "class CheckMixin(Inner):\n    def helper(self) -> int:\n        return 1\n\n\n"
        "class TestPlain(CheckMixin):\n    pass\n\n\n"
        "class TestTwice(CheckMixin):\n    pass\n"
    ),
}
MIXED = "tests/test_mixed.py"


@pytest.mark.parametrize("spelling", sorted(MIXED_IN))
def test_a_test_mixed_in_from_a_base_of_its_file_is_inventoried_under_each_subclass(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, spelling: str
) -> None:
    header = "import unittest\n\nfrom shop.discounts import stack_discounts\n\n\n"
    base = branch(inventory_repo, f"mixed/{spelling}", write(MIXED, header + MIXED_IN[spelling]))
    code, report, _ = run_inventory(
        inventory_repo, base, base, tmp_path, *collected_by(inventory_python)
    )
    assert code == 0, report["summary"]
    rows = {row[0]: row[1][0] for row in report["evidence"]["tests"] if row[0].startswith(MIXED)}
    subclasses = (
        ("Plain", "Twice") if spelling.startswith("unittest") else ("TestPlain", "TestTwice")
    )
    assert rows == {f"{MIXED}::{cls}::test_stacks": 1 for cls in subclasses}
    # The assert dropped from the base: every subclass's test stops testing.
    weakened = edits(
        (
            MIXED,
            "        assert stack_discounts(100, []) == 100\n",
            "        stack_discounts(100, [])\n",
        )
    )
    head = branch(inventory_repo, f"mixed/{spelling}-weakened", weakened, base=base)
    code, report, _ = run_inventory(
        inventory_repo, base, head, tmp_path, *collected_by(inventory_python)
    )
    assert code == 1, report["summary"]
    lost = {f["id"] for f in report["evidence"]["findings"]}
    assert {f"{MIXED}::{cls}::test_stacks" for cls in subclasses} <= lost, lost


def test_a_patch_that_cannot_be_collected_is_one_finding(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path
) -> None:
    broken = edits(("tests/test_orders.py", "import json\n", "import json\nimport no_such_mod\n"))
    head = branch(inventory_repo, "collect/import-error", broken)
    code, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python)
    )
    assert code == 1, report["summary"]
    (found,) = report["evidence"]["findings"]
    assert found["rule"] == "not-collected"
    assert "fails on the patch" in found["reason"]
    assert "\n" not in found["reason"]
    assert report["evidence"]["collection"]["patch_failed"]


LEGACY = """\
import unittest
import warnings

warnings.simplefilter("error")  # as Python-Markdown's tests/test_legacy.py does at import


class TestLegacy(unittest.TestCase):
    def test_sum(self) -> None:
        self.assertEqual(1 + 1, 2)
"""


def test_a_module_that_turns_warnings_into_errors_leaves_pytests_notes_as_notes(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path
) -> None:
    """A module collected after it imports unittest's TestSuite, a class pytest notes it cannot
    collect: the project's unittest runner never sees the note, so it fails no collection."""
    suite = "from unittest import TestSuite  # noqa: F401\n\nimport pytest\n"
    added = edits((D, "import pytest\n", suite))

    def change(tree: Path) -> None:
        (tree / "tests/test_a_legacy.py").write_text(LEGACY, "utf-8")
        added(tree)

    head = branch(inventory_repo, "collect/warnings-as-errors", change)
    code, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python)
    )
    assert code == 0, report["summary"]
    assert "tests/test_a_legacy.py::TestLegacy::test_sum" in report["evidence"]["collected_patch"]


# --- 4: outcome hooks loaded through configuration --------------------------------------------

LOADERS: dict[str, Change] = {
    "pyproject-addopts": plugin_module_and(
        pyproject(TESTPATHS, TESTPATHS + 'addopts = "-p qa_support"\n')
    ),
    "pyproject-addopts-list": plugin_module_and(
        pyproject(TESTPATHS, TESTPATHS + 'addopts = [\n    "-q",\n    "-pqa_support",\n]\n')
    ),
    "setup-cfg-addopts": plugin_module_and(
        write("setup.cfg", "[tool:pytest]\naddopts = -p qa_support\n")
    ),
    "pytest-plugins-in-test-module": plugin_module_and(
        edits(
            (
                "tests/test_orders.py",
                "import json\n",
                'import json\n\npytest_plugins = ["qa_support"]\n',
            )
        )
    ),
    "pytest11-entry-point": pyproject(
        "[tool.flit.module]\n",
        '[project.entry-points.pytest11]\nqa = "shop.qa"\n\n[tool.flit.module]\n',
    ),
    "pytest-addopts-in-noxfile": append(
        "noxfile.py", '\n\nos.environ["PYTEST_ADDOPTS"] = "-p qa_support"\n'
    ),
}


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_plugin_added_through_configuration_blocks(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, name: str
) -> None:
    head = branch(inventory_repo, f"plugin/{name}", LOADERS[name])
    code, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python)
    )
    assert code == 1, report["summary"]
    hooks = [f for f in report["evidence"]["findings"] if f["rule"] == "outcome-hook"]
    assert hooks, report["evidence"]["findings"]
    assert any("qa" in f["reason"] for f in hooks), hooks


def test_plugin_in_the_judged_environment_blocks(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path
) -> None:
    head = branch(inventory_repo, "plugin/environment", NEW_PATHS["add-a-testpath"])
    env = {"PYTEST_ADDOPTS": "-p qa_support"}
    code, report, _ = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python), env=env
    )
    assert code == 1, report["summary"]
    (found,) = report["evidence"]["findings"]
    assert found["rule"] == "outcome-hook"
    assert found["path"] == "PYTEST_ADDOPTS"


def test_plugin_the_parent_already_loads_is_not_a_finding(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path
) -> None:
    base = branch(inventory_repo, "plugin/on-the-base", LOADERS["pyproject-addopts"])
    moved = edits(
        ("pyproject.toml", 'addopts = "-p qa_support"\n', 'addopts = "-q -p no:doctest"\n'),
        (
            "tests/test_orders.py",
            "import json\n",
            'import json\n\npytest_plugins = ["qa_support"]\n',
        ),
    )
    head = branch(inventory_repo, "plugin/moved-to-a-module", moved, base=base)
    code, report, _ = run_inventory(
        inventory_repo, base, head, tmp_path, *collected_by(inventory_python)
    )
    assert report["evidence"]["findings"] == []
    assert code == 0, report["summary"]


# --- 5: collections cached by tree ------------------------------------------------------------


def test_collections_are_cached_by_tree(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path
) -> None:
    head = branch(inventory_repo, "collect/cached", NEW_PATHS["add-python-files"])
    cache = tmp_path / "cache.json"
    runs = [
        run_inventory(
            inventory_repo,
            "main",
            head,
            tmp_path / str(i),
            *collected_by(inventory_python),
            "--cache",
            str(cache),
        )
        for i in range(2)
    ]
    assert [r[1]["evidence"]["collection"]["cached"] for r in runs] == [
        [False, False],
        [True, True],
    ]
    assert runs[0][1]["evidence"]["collection"] == {
        **runs[1][1]["evidence"]["collection"],
        "cached": [False, False],
    }
    assert runs[1][0] == 0


def test_fresh_environments_of_the_same_pins_share_a_collection_key(
    inventory_repo: Path, tmp_path: Path, wheelhouse: Path
) -> None:
    """The judge builds its environments anew on every run, elsewhere each time."""
    requirements = inventory_repo / "scripts/requirements-judge.txt"
    first, second = (
        tools_env(tmp_path / name / "env", wheelhouse, requirements)[0] for name in "ab"
    )
    bare = tmp_path / "bare" / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    args = ("tests",)

    assert collection_key(first, inventory_repo, args, False) == collection_key(
        second, inventory_repo, args, False
    )
    assert collection_key(first, inventory_repo, args, False) != collection_key(
        bare / "bin/python", inventory_repo, args, False
    )
    assert collection_key(first, inventory_repo, args, False) != collection_key(
        first, inventory_repo, args, True
    )


def hypothesis_options(extra: str) -> Change:
    """The base's tests need hypothesis' plugin (an option of it in addopts), named or not."""

    def change(tree: Path) -> None:
        edit(tree / "pyproject.toml", TESTPATHS, TESTPATHS + 'addopts = "--hypothesis-seed=0"\n')
        if extra:
            table = f"[project.optional-dependencies]\n{extra} = ['hypothesis']\n\n"
            edit(tree / "pyproject.toml", "[project.scripts]", table + "[project.scripts]")
            judge_yaml = tree / "oracle/judge.yaml"
            edit(judge_yaml, 'test_extra: ""', f'test_extra: "{extra}"')

    return change


@pytest.mark.parametrize(("extra", "autoload"), [("test", False), ("", True)])
def test_plugins_of_the_test_extra_load_by_name_with_autoloading_off(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, extra: str, autoload: bool
) -> None:
    """Named in judge.yaml `test_extra`, hypothesis' plugin loads by name; unnamed, the
    collection only succeeds with autoloading back on (the fallback the report records)."""
    base = branch(inventory_repo, f"collect/extra-{extra or 'none'}", hypothesis_options(extra))
    code, report, _ = run_inventory(
        inventory_repo, base, base, tmp_path, *collected_by(inventory_python)
    )
    assert code == 0, report["summary"]
    assert report["evidence"]["collection"]["plugin_autoload"] is autoload


# --- 6: GitHub annotations --------------------------------------------------------------------


def test_findings_are_github_annotations(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path
) -> None:
    head = branch(inventory_repo, "collect/annotated", DROPPED["drop-a-row-of-another-test"])
    env = {"GITHUB_ACTIONS": "true"}
    code, report, out = run_inventory(
        inventory_repo, "main", head, tmp_path, *collected_by(inventory_python), env=env
    )
    assert code == 1
    (found,) = report["evidence"]["findings"]
    line = found["patch"]["line"]
    assert out.splitlines() == [
        f"::error file={CLI},line={line},title=inventory not-collected::{found['reason']}"
    ]
    _, _, quiet = run_inventory(
        inventory_repo, "main", head, tmp_path / "quiet", *collected_by(inventory_python)
    )
    assert "::error" not in quiet


def test_annotation_escapes_what_github_reads_as_syntax() -> None:
    text = annotation("weakened", "a,b:c.py", 7, "100% sure\nnot:really, no\r")
    assert text == (
        "::error file=a%2Cb%3Ac.py,line=7,title=inventory weakened::100%25 sure%0Anot:really, no%0D"
    )
    assert annotation("outcome-hook", "PYTEST_ADDOPTS", 0, "x") == (
        "::error file=PYTEST_ADDOPTS,title=inventory outcome-hook::x"
    )


# --- 4: tests named by `python_functions`, `python_classes` and `python_files` ---------------

CHECKS = """\
from shop.discounts import apply_discount


def check_full_rate() -> None:
    assert apply_discount(1000, 10_000) == 0
    assert apply_discount(0, 10_000) == 0


class CheckHalf:
    def check_even(self) -> None:
        assert apply_discount(1000, 5000) == 500
"""


def naming_layout(repo_: Path) -> None:
    (repo_ / "tests/check_rates.py").write_text(CHECKS)
    edit(
        repo_ / "pyproject.toml",
        TESTPATHS,
        TESTPATHS + 'python_files = ["test_*.py", "check_*.py"]\n'
        'python_classes = ["Test", "Check"]\npython_functions = ["test", "check_*"]\n',
    )


NAMING_ATTACKS: dict[str, tuple[Change, str]] = {
    "drop-a-check": (
        edits(("tests/check_rates.py", "    assert apply_discount(0, 10_000) == 0\n", "")),
        "fewer-asserts",
    ),
    "weaken-a-check": (
        edits(("tests/check_rates.py", "== 500", "> 0")),
        "weakened",
    ),
}


@pytest.mark.parametrize("mode", ["ast", "collect"])
@pytest.mark.parametrize("name", sorted(NAMING_ATTACKS))
def test_tests_named_by_the_configuration_are_inventoried(
    inventory_repo: Path, inventory_python: Path, tmp_path: Path, mode: str, name: str
) -> None:
    """With or without `--collect-only`, the AST reads the parent's naming settings."""
    base = branch(inventory_repo, f"naming-base/{mode}/{name}", naming_layout)
    change, rule = NAMING_ATTACKS[name]
    head = branch(inventory_repo, f"naming/{mode}/{name}", change, base=base)
    extra = collected_by(inventory_python) if mode == "collect" else ()
    code, report, _ = run_inventory(inventory_repo, base, head, tmp_path, *extra)
    rows = {row[0]: row for row in report["evidence"]["tests"]}
    assert rows["tests/check_rates.py::check_full_rate"][1] == [2, 0, 0], rows
    assert rows["tests/check_rates.py::CheckHalf::check_even"][1] == [1, 0, 0], rows
    assert code == 1, report["summary"]
    assert rule in rules_of(report), report["evidence"]["findings"]
