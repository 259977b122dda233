"""The folders of scripts/_gate are floors: a module imports its own folder and the floors below
it, never one above. Read from the sources' imports (every import, a function's own too)."""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

import pytest
from _gate.core.steps import STEPS
from _gate.judge.base import same_files
from _gate.runs.pytest_run import copied_plugins
from _gate.runs.reuse import code_files

from tests.helpers import SCRIPTS, imports

pytestmark = pytest.mark.fast

GATE = SCRIPTS / "_gate"
# What each folder may import of the package beyond itself. The plugin is the ground floor: its
# files run inside the project's environment, so they have the standard library and nothing
# else of the gate. core stands on it alone (a value the judge and the plugin must agree on,
# the shard rule and the call timeout, is written once, in the plugin).
FLOORS: dict[str, set[str]] = {
    "plugin": set(),
    "core": {"plugin"},
    "runs": {"core", "plugin"},
    "inventory": {"runs", "core", "plugin"},
    "strength": {"runs", "core", "plugin"},
    "change": {"runs", "core", "plugin"},
    "verdict": {"core", "plugin"},
    "steps": {"inventory", "change", "runs", "core", "plugin"},
    "judge": {"verdict", "change", "runs", "core", "plugin"},
}
# What pytest brings into the runs the plugin is copied into.
PYTEST_RUN = {"pytest", "_pytest", "hypothesis"}


def folder_of(name: str) -> str:
    """The folder of the package a dotted import name lies in, "" for one outside it (the
    package's root is no folder: a module never imports a name from it)."""
    if name.startswith("."):
        return "a relative import"
    parts = name.split(".")
    if parts[0] != "_gate":
        return ""
    return parts[1] if len(parts) > 1 else "the package's root"


def package_modules(folder: str) -> list[Path]:
    return sorted((GATE / folder).glob("*.py"))


def test_every_module_of_the_package_lies_in_a_floor() -> None:
    assert sorted(p.name for p in GATE.glob("*.py")) == ["__init__.py"]
    folders = {p.name for p in GATE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(FLOORS)
    assert all((GATE / folder / "__init__.py").is_file() for folder in FLOORS)


@pytest.mark.parametrize("folder", sorted(FLOORS))
def test_a_floor_imports_only_itself_and_the_floors_below(folder: str) -> None:
    allowed = {folder, *FLOORS[folder]}
    upward = {
        f"{module.name}: {name}"
        for module in package_modules(folder)
        for name in imports(module)
        if folder_of(name) and folder_of(name) not in allowed
    }
    assert upward == set()


def test_a_step_imports_no_other_step() -> None:
    """What a step reads of another comes to it as an earlier outcome, never by import."""
    steps = {p.stem for p in package_modules("steps")} - {"__init__"}
    crossing = {
        f"{module.name}: {name}"
        for module in package_modules("steps")
        for name in imports(module)
        if name.startswith("_gate.steps.") and name.split(".")[2] in steps - {module.stem}
    }
    assert crossing == set()
    assert steps == {step.module.split(".")[-1] for step in STEPS if step.script}


def test_the_floors_have_no_cycle() -> None:
    seen: list[str] = []
    while len(seen) < len(FLOORS):
        ready = [f for f in FLOORS if f not in seen and FLOORS[f] <= set(seen)]
        assert ready, f"a cycle among {set(FLOORS) - set(seen)}"
        seen += ready
    assert seen[0] == "plugin"


def test_the_plugin_imports_only_the_standard_library_and_what_pytest_brings() -> None:
    outside = {
        f"{module.name}: {name}"
        for module in package_modules("plugin")
        for name in imports(module)
        if not name.startswith("_gate.")
        and name.split(".")[0] not in {*sys.stdlib_module_names, *PYTEST_RUN, "__future__"}
    }
    assert outside == set()


def test_what_a_trusted_pytest_run_gets_is_exactly_the_plugin_folder(tmp_path: Path) -> None:
    folder = copied_plugins(tmp_path / "plugins")
    shipped = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.py"))
    expected = ["_gate/__init__.py", *(f"_gate/plugin/{p.name}" for p in package_modules("plugin"))]
    assert shipped == sorted(expected)
    assert "syscall_watch.py" in {
        Path(name).name for name in shipped
    }  # the launcher runs it beside itself


def scripts_copy(tmp_path: Path, name: str) -> Path:
    """The gate's code as a bake ships it (no caches a run here left beside it)."""
    dest = tmp_path / name
    for path in code_files(SCRIPTS):
        target = dest / path.relative_to(SCRIPTS)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return dest


def test_a_base_whose_module_in_a_floor_differs_is_not_the_judges_own(tmp_path: Path) -> None:
    """The judge decides steps in its own process only where the base's scripts are its own,
    byte for byte: a module deep in a floor counts like any other."""
    own, base = scripts_copy(tmp_path, "own"), scripts_copy(tmp_path, "base")
    assert same_files(base, own)
    with (base / "_gate" / "core" / "protocol.py").open("a", encoding="utf-8") as f:
        f.write("# the base's own edit\n")
    assert not same_files(base, own)


def test_what_kept_runs_depend_on_holds_every_module_of_every_floor() -> None:
    digested = set(code_files(SCRIPTS))
    assert {p for p in GATE.rglob("*.py") if "__pycache__" not in p.parts} <= digested


# Run as scripts by path under `python -I -S`, which puts no folder on sys.path: each holds all
# it needs in one file (the launcher, and the syscall watcher it starts beside itself).
ONE_FILE_SCRIPTS = {"_gate/plugin/confine.py", "_gate/plugin/syscall_watch.py"}
MODULE_LINES, FUNCTION_LINES = 500, 60


def test_no_module_of_the_gate_is_a_grab_bag() -> None:
    """Every module under 500 lines and every function under 60: past that, a module holds
    more than one job and a function more than one step, and they split along their seams."""
    long_modules, long_functions = [], []
    for path in sorted(p for p in SCRIPTS.rglob("*.py") if "__pycache__" not in p.parts):
        name = path.relative_to(SCRIPTS).as_posix()
        text = path.read_text("utf-8")
        if text.count("\n") > MODULE_LINES and name not in ONE_FILE_SCRIPTS:
            long_modules.append(name)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                if node.end_lineno - node.lineno + 1 > FUNCTION_LINES:
                    long_functions.append(f"{name}: {node.name}")
    assert long_modules == []
    assert long_functions == []
