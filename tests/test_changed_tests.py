"""The inventory's run of the patch's tests runs only the test modules the patch changed, when
nothing else the others could read differs: their outcomes and checks are the crossrun's run of
the same files on the same build (issue 50, cost). Whatever a changed module reaches runs again.

The fast half checks which modules must run on prepared folders; the e2e half judges real
branches of the bake: an honest test edit merges with one module run, and a weakened helper in
a changed module that an unchanged module imports is still found, with a changed conftest.py too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from _gate.inventory.changed_tests import combined, to_run
from _gate.runs.pytest_run import PytestRun

from tools.bakery import branch, edit, git, judge

TESTS = {
    "tests/test_a.py": "def test_a():\n    assert 1\n",
    "tests/test_b.py": "def test_b():\n    assert 2\n",
    "tests/test_e.py": "from test_b import test_b as test_e\n",  # reads test_b
    "tests/test_f.py": "import test_e  # noqa: a lint\n",  # reads test_e
    "tests/test_g.py": 'from pathlib import Path\n\nFILES = Path("examples").glob("*")\n',
    "tests/test_h.py": 'TEXT = open("README.md").read()\n',
    "tests/test_i.py": "from tools.release import NOTES\n",
    "tools/release.py": 'NOTES = "docs/changelog.md"\n',  # read by test_i through an import
    "tools/lint.py": 'DOCS = "docs/changelog.md"\n',  # no test imports it
    "tests/conftest.py": "",
    "tests/data.json": "{}\n",
    "README.md": "# x\n",
    "docs/changelog.md": "- 1.0\n",
    "examples/one.md": "*a*\n",
    "pkg/__init__.py": "X = 1\n",
}
TEST_FILES = {f"tests/test_{name}.py" for name in "abcefghi"}


def trees(tmp_path: Path, changes: Mapping[str, str | None]) -> tuple[Path, Path]:
    """A parent folder with TESTS and a patch folder with `changes` applied (None deletes)."""
    parent, patch = tmp_path / "parent", tmp_path / "patch"
    for root, files in ((parent, TESTS), (patch, {**TESTS, **changes})):
        for rel, text in files.items():
            if text is not None:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text, "utf-8")
    return parent, patch


# The changes whose other modules are the crossrun's, and the modules that run.
ONLY: dict[str, tuple[dict[str, str | None], list[str]]] = {
    "edited": ({"tests/test_a.py": "def test_a():\n    assert 3\n"}, ["tests/test_a.py"]),
    "added": ({"tests/test_c.py": "def test_c():\n    assert 1\n"}, ["tests/test_c.py"]),
    "deleted": ({"tests/test_a.py": None}, ["tests/test_a.py"]),
    "the build's own module": ({"pkg/__init__.py": "X = 2\n"}, []),
    "a test and a document another reads": (
        {"README.md": "# y\n", "tests/test_a.py": "def test_a():\n    assert 3\n"},
        ["tests/test_a.py", "tests/test_h.py"],
    ),
    "examples a test globs": ({"examples/one.md": "*b*\n"}, ["tests/test_g.py"]),
    "a document a test reads": ({"README.md": "# y\n"}, ["tests/test_h.py"]),
    "a changelog a test imports a reader of": (
        {"docs/changelog.md": "- 1.1\n"},
        ["tests/test_i.py"],
    ),
    "read by others": (
        {"tests/test_b.py": "def test_b():\n    pass\n"},
        ["tests/test_b.py", "tests/test_e.py", "tests/test_f.py"],
    ),
}
# The changes after which every module runs: what an unchanged module may read differs.
EVERY = {
    "conftest.py": {"tests/conftest.py": "import pytest\n"},
    "a data file": {"tests/data.json": '{"rows": []}\n'},
    "pytest's configuration": {"pyproject.toml": "[tool.pytest.ini_options]\n"},
    "a helper": {"tests/helpers.py": "def check(x):\n    pass\n"},
}


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(ONLY))
def test_only_the_changed_test_modules_and_their_readers_run(tmp_path: Path, name: str) -> None:
    changes, expected = ONLY[name]
    parent, patch = trees(tmp_path, changes)
    assert to_run(parent, patch, ["pkg"], ["tests"], TEST_FILES) == expected


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(EVERY))
def test_every_module_runs_when_something_else_changed(tmp_path: Path, name: str) -> None:
    parent, patch = trees(tmp_path, {**EVERY[name], "tests/test_a.py": "def test_a(): pass\n"})
    assert to_run(parent, patch, ["pkg"], ["tests"], TEST_FILES) is None


@pytest.mark.fast
def test_a_conftest_naming_a_changed_document_makes_every_module_run(tmp_path: Path) -> None:
    parent, patch = trees(tmp_path, {"tests/conftest.py": 'SPEC = "docs/changelog.md"\n'})
    (parent / "tests/conftest.py").write_text('SPEC = "docs/changelog.md"\n', "utf-8")
    (patch / "docs/changelog.md").write_text("- 2.0\n", "utf-8")
    assert to_run(parent, patch, ["pkg"], ["tests"], TEST_FILES) is None


@pytest.mark.fast
def test_a_helper_naming_a_changed_module_makes_every_module_run(tmp_path: Path) -> None:
    helper = {"tests/helpers.py": "from test_a import *\n"}
    parent, patch = trees(tmp_path, helper)
    (patch / "tests/test_a.py").write_text("def test_a():\n    pass\n", "utf-8")
    assert to_run(parent, patch, ["pkg"], ["tests"], TEST_FILES) is None


def pytest_run(outcomes: dict[str, str], checks: dict[str, list[str]]) -> PytestRun:
    return PytestRun(1, False, outcomes, {}, {}, {}, "", checks=checks)


@pytest.mark.fast
def test_the_combined_run_holds_the_run_modules_and_the_crossruns_others() -> None:
    crossran = pytest_run(
        {"t/test_a.py::x": "passed", "t/test_b.py::y": "failed", "t/test_d.py": "error"},
        {"t/test_a.py::x": ["a1"], "t/test_b.py::y": ["b1"]},
    )
    run = pytest_run({"t/test_a.py::x2": "passed"}, {"t/test_a.py::x2": ["a2"]})
    got = combined(run, crossran, ["t/test_a.py", "t/test_d.py"])  # test_d.py: deleted
    assert got.outcomes == {"t/test_b.py::y": "failed", "t/test_a.py::x2": "passed"}
    assert got.checks == {"t/test_b.py::y": ["b1"], "t/test_a.py::x2": ["a2"]}
    only_deleted = combined(None, crossran, ["t/test_d.py"])
    assert only_deleted.outcomes == {"t/test_a.py::x": "passed", "t/test_b.py::y": "failed"}
    lost = PytestRun(1, True, None, {}, {}, {}, "")
    assert combined(lost, crossran, ["t/test_a.py"]).outcomes is None


D = "tests/test_discounts.py"
SHARED = "tests/test_totals.py"  # its helper is imported by READER, which the patch leaves
READER = "tests/test_totals_more.py"
HELPER = (
    "from shop.orders import parse_cart, quote\n\n\n"
    "def check_total(items: list[dict[str, object]], cents: int) -> None:\n"
    '    assert quote(parse_cart({"items": items}))["total_cents"] == cents\n\n\n'
    "def test_one_mug() -> None:\n"
    '    check_total([{"sku": "MUG", "qty": 1, "price_cents": 999}], 999)\n'
)
READS = (
    "from test_totals import check_total\n\n\n"
    "def test_two_mugs() -> None:\n"
    '    check_total([{"sku": "MUG", "qty": 2, "price_cents": 999}], 1998)\n'
)


@pytest.fixture(scope="module")
def based(shop: Path) -> Path:
    """The bake with a test module whose helper another test module imports, on main."""
    (shop / SHARED).write_text(HELPER, "utf-8")
    (shop / READER).write_text(READS, "utf-8")
    git(shop, "add", "--all")
    git(shop, "commit", "-q", "--no-verify", "-m", "tests: a shared check")
    return shop


def modules_run(verdict_step: dict[str, object]) -> object:
    evidence = verdict_step["evidence"]
    assert isinstance(evidence, dict)
    return evidence["run_time"]["patch_run"]["modules_run"]


def reworded(tree: Path) -> None:
    """A test's comment and the README, as a commit adds its changelog line."""
    edit(tree / D, "# 20 % of 10000", "# twenty per cent of 10000")
    with (tree / "README.md").open("a", encoding="utf-8") as readme:
        readme.write("\nDiscounts: a comment says twenty per cent.\n")


@pytest.mark.e2e
def test_an_honest_test_edit_runs_its_module_alone_and_merges(based: Path) -> None:
    head = branch(based, "changed/honest", reworded)
    verdict = judge(based, "--head", head)
    assert verdict.report["verdict"] == "merge", verdict.output
    inventory = verdict.step("assert-inventory")
    assert modules_run(inventory) == [D], inventory["evidence"]["run_time"]
    run = inventory["evidence"]["run_time"]["patch_run"]
    assert run["from_the_crossrun"] > 0
    tests = verdict.step("tests")["evidence"]
    assert any(node.startswith("tests/test_orders.py::") for node in tests["outcomes"]), tests


def weakened_helper(tree: Path) -> None:
    """The helper stops checking totals over 1000: READER's test checks nothing now, which only
    its run shows (the assert's text and count stay)."""
    early = "    if cents > 1000:\n        return\n"
    edit(tree / SHARED, "    assert quote(", f"{early}    assert quote(")


def weakened_with_conftest(tree: Path) -> None:
    weakened_helper(tree)
    (tree / "tests/conftest.py").write_text('"""Shared fixtures."""\n', "utf-8")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("name", "change", "expected"),
    [
        ("helper", weakened_helper, [SHARED, READER]),
        ("helper-and-conftest", weakened_with_conftest, "all"),
    ],
)
def test_a_weakened_helper_an_unchanged_module_imports_is_still_found(
    based: Path, name: str, change: object, expected: object
) -> None:
    """READER's test checks nothing now: coverage removed (its parent version passes on the
    patch build), which a code owner reviews; shared with the crossrun, it would merge."""
    assert callable(change)
    head = branch(based, f"changed/{name}", change)
    verdict = judge(based, "--head", head)
    assert verdict.report["verdict"] == "needs-review", verdict.output
    inventory = verdict.step("assert-inventory")
    assert inventory["status"] == "needs-review", inventory["summary"]
    removed = f"coverage removed: {READER}::test_two_mugs (fewer-checks)"
    assert removed in inventory["summary"], inventory["summary"]
    assert modules_run(inventory) == expected
