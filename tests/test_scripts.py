"""The vendorable scripts/: standalone, documented, and their pure parts on known inputs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from _gate.core.patterns import pattern_regex
from _gate.runs.cases import pointer_get, valid_pointer
from _gate.steps.write_set import classify

from tests.helpers import SCRIPTS, imports

pytestmark = pytest.mark.fast  # step tests on prepared trees: no build, no nox

ENTRY_POINTS = sorted(p for p in SCRIPTS.glob("*.py") if not p.name.startswith("_"))
# The one entry that needs more than PyYAML: it runs the user's own tests, in the tests
# session's environment, so it imports pytest, and only once --help is past.
ENTRY_THIRD_PARTY = {"unit_tests.py": {"pytest"}}
PACKAGE = sorted((SCRIPTS / "_gate").rglob("*.py"))
# The gate's pytest plugins and the subject worker import pytest and hypothesis from the
# judge's tools; strength_cassettes is a test module of the strength session's pytest runs.
# Which folder of the package may import which: tests/test_layering.py.
THIRD_PARTY = {
    "pytest_evidence.py": {"pytest", "_pytest"},  # pytest's own way to show a value
    "tamper.py": {"pytest"},
    "subject.py": {"pytest", "hypothesis"},
    "strength_cassettes.py": {"pytest"},
    "strength_plugin.py": {"pytest", "hypothesis"},
}


def imported(source: Path) -> set[str]:
    """The top-level names of what `source` imports, the standard library's left out."""
    roots = {name.split(".")[0] for name in imports(source)}
    return roots - set(sys.stdlib_module_names)


@pytest.mark.parametrize("script", ENTRY_POINTS, ids=lambda p: p.name)
def test_script_help_documents_exit_codes(script: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "exit codes:" in proc.stdout


@pytest.mark.parametrize("script", ENTRY_POINTS, ids=lambda p: p.name)
def test_entry_scripts_import_the_private_package_only_never_each_other(script: Path) -> None:
    allowed = {"yaml", "_gate", *ENTRY_THIRD_PARTY.get(script.name, set())}
    assert imported(script) - allowed == set()
    # A module of it by name (`from _gate.steps.oracle import STEP`), never the package's
    # namespace (`import _gate`, `from _gate import steps`).
    gate = [name.split(".") for name in imports(script) if name.split(".")[0] == "_gate"]
    assert gate, script
    assert all(len(parts) > 2 for parts in gate), gate
    tree = ast.parse(script.read_bytes())
    top_level = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    assert not top_level & ENTRY_THIRD_PARTY.get(script.name, set())  # --help needs none
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    assert main.returns is not None
    assert ast.unparse(main.returns) == "int"


@pytest.mark.parametrize("module", PACKAGE, ids=lambda p: p.relative_to(SCRIPTS).as_posix())
def test_package_modules_import_stdlib_pyyaml_and_the_package_only(module: Path) -> None:
    allowed = {"yaml", "_gate", *THIRD_PARTY.get(module.name, set())}
    assert imported(module) - allowed == set()


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("/oracle/", "oracle/cases.yaml", True),
        ("/oracle/", "src/oracle/x.py", False),
        ("/conftest.py", "conftest.py", True),
        ("/conftest.py", "tests/conftest.py", False),
        ("/.github/", ".github/workflows/oracle.yml", True),
        ("*.lock", "deep/down/fixtures.lock", True),
        ("docs/*.md", "docs/a.md", True),
        ("docs/*.md", "docs/sub/a.md", False),
        ("/src/**/secret.py", "src/a/b/secret.py", True),
    ],
)
def test_codeowners_patterns(pattern: str, path: str, hit: bool) -> None:
    assert bool(pattern_regex(pattern).fullmatch(path)) is hit


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("oracle/test_properties.py", "protected"),
        ("fixtures/carts.jsonl", "fixtures"),
        ("tests/conftest.py", "tests"),
        ("src/shop/test_helpers.py", "tests"),
        ("conftest.py", "protected"),
        ("pyproject.toml", "source"),
    ],
)
def test_write_set_classes(path: str, kind: str) -> None:
    protected = ("/oracle/", "/conftest.py", "/fixtures.lock")
    assert classify(path, protected, ("tests",), {})[0] == kind


def test_json_pointer_follows_rfc_6901() -> None:
    doc = {"a/b": {"m~n": [10, 20]}, "": 1}
    assert pointer_get(doc, "/a~1b/m~0n/1") == 20
    assert pointer_get(doc, "/") == 1
    assert pointer_get(doc, "") == doc
    assert pointer_get(doc, "/a~1b/m~0n/01") == {"$missing": True}
    assert valid_pointer("/a~1b/m~0n")
    assert not valid_pointer("/a~2")
    assert not valid_pointer("a")


def test_sarif_puts_each_finding_on_its_file_and_line(tmp_path: Path) -> None:
    from _gate.verdict.sarif import sarif_log

    cases = tmp_path / "cases.yaml"
    cases.write_text("cases:\n  - id: a\n    argv: []\n  - id: 'b'\n    argv: []\n")
    evidence = {
        "write-set": {"protected": [{"path": ".github/workflows/ci.yml", "rule": "/.github/"}]},
        "replay": {"mismatches": [{"id": "b", "field": "stdout.json"}]},
        "crossrun": {"failures": [{"id": "test.py::TestX::test_y", "outcome": "failed"}]},
    }
    steps = [{"name": name, "status": "block"} for name in evidence]
    steps[0]["status"] = "needs-review"
    steps.append({"name": "tests", "status": "advisory"})
    report = {"verdict": "error", "steps": steps}
    log = sarif_log(report, lambda step: evidence.get(step["name"], {}), cases)
    found = [
        (r["ruleId"], r["level"], where["artifactLocation"]["uri"], where["region"]["startLine"])
        for r in log["runs"][0]["results"]
        for where in [r["locations"][0]["physicalLocation"]]
    ]
    assert found == [
        ("write-set/protected", "warning", ".github/workflows/ci.yml", 1),
        ("replay/changed", "error", "oracle/cases.yaml", 4),
        ("crossrun/failed", "error", "test.py", 1),
    ]
    assert log["version"] == "2.1.0"
    merged = sarif_log({**report, "verdict": "merge"}, lambda step: evidence["replay"], cases)
    assert merged["runs"][0]["results"] == []
