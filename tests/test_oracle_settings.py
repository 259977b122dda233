"""The oracle's hypothesis settings come from the trusted run, not from a decorator; its
properties and examples are counted apart."""

from __future__ import annotations

import json
from pathlib import Path

import oracle
from _gate.runs.envs import tools_env

from tests.helpers import builder
from tools.bakery import branch, git

UNDECORATED = '''"""Properties that name no settings: the oracle run's own apply."""

from hypothesis import given, settings
from hypothesis import strategies as st


def test_the_gate_settings_apply() -> None:
    current = settings()
    assert current.derandomize is True
    assert current.database is None
    assert current.deadline is None
    assert current.max_examples == 100


@given(st.integers())
def test_a_property_runs_with_them(n: int) -> None:
    assert settings().derandomize is True
'''
IDS = (
    "oracle/test_undecorated.py::test_the_gate_settings_apply",
    "oracle/test_undecorated.py::test_a_property_runs_with_them",
)


def test_an_oracle_test_without_a_decorator_runs_derandomized_without_a_database(
    shop: Path, wheelhouse: Path, tmp_path: Path
) -> None:
    name = branch(
        shop, "undecorated", lambda t: (t / "oracle/test_undecorated.py").write_text(UNDECORATED)
    )
    built = builder(shop, tmp_path / "envs", wheelhouse)(name, "parent")
    oracle_python = tools_env(
        tmp_path / "oracle-env", wheelhouse, built["tree"] / "scripts/requirements-judge.txt"
    )[0]
    report = tmp_path / "oracle.json"
    code = oracle.main(
        [
            *("--oracle", str(built["tree"] / "oracle"), "--oracle-python", str(oracle_python)),
            *("--parent-python", str(built["python"]), "--patch-python", str(built["python"])),
            *("--report", str(report)),
        ]
    )
    outcome = json.loads(report.read_text())
    assert code == 0, outcome["summary"]
    for side in ("parent", "patch"):
        assert {outcome["evidence"][side][test_id] for test_id in IDS} == {"passed"}, side
    assert not list(built["tree"].rglob(".hypothesis")), "no example database was written"
    # Properties (@given) and examples (the corpus's carts, plain tests) are counted apart.
    oracle_files = (built["tree"] / "oracle").glob("test_*.py")
    given = sum(path.read_text("utf-8").count("\n@given(") for path in oracle_files)
    examples = len(outcome["evidence"]["parent"]) - given
    assert given > 1
    assert examples > 1
    assert outcome["evidence"]["kinds"] == {"properties": given, "examples": examples}
    assert outcome["summary"].startswith(
        f"{given} property oracles and {examples} example oracles pass"
    )
    git(shop, "worktree", "prune")
