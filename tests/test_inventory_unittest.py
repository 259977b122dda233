"""The inventory on a real unittest suite: CPython's own test_bool.py, shipped with this
interpreter, committed as a project's test file and patched as an agent would patch it."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_inventory
from tools.bakery import branch, edit, git

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

SUITE = Path(sysconfig.get_path("stdlib")) / "test" / "test_bool.py"
FILE = "tests/test_bool.py"
CONFIG = """\
command: none
base_branch: main
oracle_ref: oracle/main
protected: []
tests: [tests]
"""
REPR = "        self.assertEqual(repr(False), 'False')\n"
STR = "    def test_str(self):\n"


@pytest.fixture(scope="module")
def unittest_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cpython-suite") / "repo"
    (root / "tests").mkdir(parents=True)
    shutil.copy(SUITE, root / FILE)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "--all")
    git(root, "commit", "-q", "-m", "CPython's test_bool.py as the base")
    return root


def inventory(repo: Path, head: str, tmp: Path) -> tuple[int, dict[str, Any]]:
    config = tmp / "judge.yaml"
    config.write_text(CONFIG)
    code, report, _ = run_inventory(repo, "main", head, tmp / "trees", config=config)
    return code, report


ATTACKS = {
    "equality-to-truthiness": (REPR, "        self.assertTrue(repr(False))\n", "weakened"),
    "skip-decorator": (STR, "    @unittest.skip('later')\n" + STR, "skip-added"),
    "assertion-deleted": (REPR, "", "fewer-asserts"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_on_a_real_unittest_suite_blocks(
    unittest_repo: Path, tmp_path: Path, name: str
) -> None:
    old, new, rule = ATTACKS[name]
    head = branch(unittest_repo, f"attack/{name}", lambda tree: edit(tree / FILE, old, new))
    code, report = inventory(unittest_repo, head, tmp_path)
    assert code == 1, report["summary"]
    assert rule in {f["rule"] for f in report["evidence"]["findings"]}, report["evidence"]


BENIGN = {
    "file-renamed": lambda tree: git(tree, "mv", FILE, "tests/test_booleans.py"),
    # The four repr checks of test_repr move, unchanged, into a method test_repr calls.
    "assertions-moved-into-a-helper": lambda tree: edit(
        tree / FILE,
        "    def test_repr(self):\n",
        "    def test_repr(self):\n        self.check_repr()\n\n    def check_repr(self):\n",
    ),
}


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_an_honest_change_to_a_real_unittest_suite_merges(
    unittest_repo: Path, tmp_path: Path, name: str
) -> None:
    head = branch(unittest_repo, f"benign/{name}", BENIGN[name])
    code, report = inventory(unittest_repo, head, tmp_path)
    assert report["evidence"]["findings"] == []
    assert code == 0, report["summary"]
