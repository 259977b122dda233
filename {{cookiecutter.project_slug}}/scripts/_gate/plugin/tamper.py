"""Tamper evidence for a pytest run that imports the code under test: did pytest's running and
reporting machinery stay the objects the gate's plugin saw when it loaded?

The crossrun imports the patch's package into the pytest process whose outcomes the gate
records, and a few lines there can patch pytest to turn failures into passes. The evidence
plugin takes a `snapshot` as pytest loads it (`-p`), before any conftest.py or test module of
the run; at the end of the session `machinery_changes` and `hook_changes` list what differs:

- every function and class of the modules that run a test, make its report and hand it on
  (`WATCHED`: pytest's runner, reports, python, unittest, main, ..., pluggy's, unittest's and
  the gate's plugins), each function's code, each attribute of their classes (one added too),
  the modules themselves in `sys.modules`, and `builtins.__import__`, `compile`, `exec` and
  `eval`, through which the assertion rewriter builds test modules. A change made by code
  under the run's plugin roots (pytest itself: its legacypath plugin adds attributes; the
  base's conftest.py files; a plugin named with `-p`) is no tampering;
- the functions of `ORIGINS` (`call_and_report`, `TestReport.from_item_and_call`,
  `TestCase.run`, ...) must be defined in their own package's files: a wrapper installed
  before the plugin loaded (a `.pth` file runs when the interpreter starts) is in the
  snapshot, but not in pytest's files;
- the hook relay: each hook caller, the function that runs the hooks, and every hook
  implementation, which must come from under the plugin roots: a plugin the code registers
  on the plugin manager comes from its own file.

`digest` fingerprints the outcomes the plugin wrote, so the judge sees an evidence file
rewritten after the session. Code that knows it is watched can still hide (see the threat
model); this sees the blanket forgers, which do not.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import json
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the judge reads `digest` from here without importing pytest
    import pytest

# The modules whose functions and classes run a test and carry its outcome to this plugin.
WATCHED = (
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.python",
    "_pytest.unittest",
    "_pytest.main",
    "_pytest.nodes",
    "_pytest.skipping",
    "_pytest.outcomes",
    "_pytest.fixtures",
    "_pytest.config",
    "_pytest.assertion.rewrite",
    "pluggy._callers",
    "pluggy._hooks",
    "pluggy._manager",
    "pluggy._result",
    "unittest.case",
    "unittest.result",
    "_gate.plugin.pytest_evidence",
    "_gate.plugin.tamper",
)
BUILTINS = ("__import__", "compile", "exec", "eval")
# Functions that must be defined in their module's own file (class members as Class.name).
ORIGINS = {
    "_pytest.runner": (
        "call_and_report",
        "runtestprotocol",
        "call_runtest_hook",
        "pytest_runtest_protocol",
        "pytest_runtest_makereport",
        "CallInfo.from_call",
    ),
    "_pytest.reports": (
        "TestReport.from_item_and_call",
        "TestReport.__init__",
        "BaseReport.passed",
        "BaseReport.failed",
        "BaseReport.skipped",
    ),
    "_pytest.python": ("pytest_pyfunc_call", "Function.runtest"),
    "_pytest.unittest": ("TestCaseFunction.runtest", "TestCaseFunction.addFailure"),
    "_pytest.main": ("Session.pytest_runtest_logreport",),
    "unittest.case": ("TestCase.run", "TestCase.__call__"),
    "pluggy._callers": ("_multicall",),
    "pluggy._hooks": ("HookCaller.__call__",),
    "pluggy._manager": ("PluginManager._hookexec",),
    "_pytest.assertion.rewrite": ("rewrite_asserts", "AssertionRewriter.visit_Assert"),
}
# Class attributes pytest itself sets while it runs (nodes.py marks a class it warned about).
FLAGS = frozenset({"_pytest_diamond_inheritance_warning_shown"})
# what -> (the object, its code, whether it is a class attribute: one added counts too)
Seen = dict[str, tuple[object, types.CodeType | None, bool]]


def code_of(value: object) -> types.CodeType | None:
    """The code a function, method, classmethod, staticmethod or property runs."""
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    if isinstance(value, property):
        value = value.fget
    if isinstance(value, types.MethodType):
        value = value.__func__
    return value.__code__ if isinstance(value, types.FunctionType) else None


def snapshot() -> Seen:
    seen: Seen = {f"builtins.{name}": (getattr(builtins, name), None, False) for name in BUILTINS}
    for name in WATCHED:
        module = importlib.import_module(name)
        seen[f"sys.modules[{name!r}]"] = (sys.modules.get(name), None, False)
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType):
                seen[f"{name}.{attr}"] = (value, value.__code__, False)
            elif isinstance(value, type):
                seen[f"{name}.{attr}"] = (value, None, False)
                if value.__module__ == name:  # its own classes: each attribute, and any added
                    for key, member in list(vars(value).items()):
                        seen[f"{name}.{attr}.{key}"] = (member, code_of(member), True)
    return seen


def machinery_changes(before: Seen, roots: list[Path]) -> list[str]:
    """What differs from `before`, but what code under `roots` set meanwhile: pytest itself
    (its legacypath plugin adds attributes to Config, Node and others when it is configured),
    the base's conftest.py files, and the plugins named with `-p` (hypothesis wraps pytest's
    fixture decorator)."""
    after = snapshot()
    found = []
    for what in sorted(before.keys() | after.keys()):
        old, new = before.get(what), after.get(what)
        if new is None:
            found.append(f"{what} removed")
        elif old is None:
            if new[2] and not ours(new[1], roots) and what.rpartition(".")[2] not in FLAGS:
                found.append(f"{what} added")
        elif (new[0] is not old[0] or new[1] is not old[1]) and not ours(new[1], roots):
            found.append(f"{what} replaced")
    return found + misplaced()


def ours(code: object, roots: list[Path]) -> bool:
    return isinstance(code, types.CodeType) and allowed(code, roots)


def package_root(name: str) -> Path:
    """The folder of a top-level package (or a module's file)."""
    file = Path(module_file(name))
    return file.parent if file.name == "__init__.py" else file


def member(module: types.ModuleType, dotted: str) -> object:
    owner, _, name = dotted.rpartition(".")
    return vars(getattr(module, owner))[name] if owner else getattr(module, name)


def misplaced() -> list[str]:
    """The functions of ORIGINS not defined in their package's files: wrapped before we
    loaded. One this version of pytest does not have is skipped (a removed one shows above)."""
    found = []
    for name, members in ORIGINS.items():
        module = sys.modules[name]
        root = package_root(name.split(".", 1)[0])
        for dotted in members:
            try:
                code = code_of(member(module, dotted))
            except (AttributeError, KeyError):
                continue
            if code is None or not allowed(code, [root]):
                where = code.co_filename if code else "no Python code"
                found.append(f"{name}.{dotted} is defined in {where}")
    return found


def relay(pm: pytest.PytestPluginManager) -> dict[str, Any]:
    """The hook callers by name, and the function that runs every hook."""
    return {"callers": dict(vars(pm.hook)), "exec": pm._inner_hookexec}


def plugin_roots(config: pytest.Config) -> list[Path]:
    """Where a hook implementation may come from: pytest, pluggy, the gate's plugins, the run's
    root (the base's conftest.py files) and each plugin named with `-p` (the tests' own)."""
    roots = [package_root(name) for name in ("_pytest", "pluggy", "_gate")]
    roots.append(config.rootpath)
    args = list(config.invocation_params.args)
    for index, arg in enumerate(args):
        name = args[index + 1] if arg == "-p" and index + 1 < len(args) else ""
        name = arg[2:] if arg.startswith("-p") and len(arg) > 2 else name
        top = name.split(".", 1)[0]
        if top and not name.startswith("no:") and top in sys.modules:
            roots.append(package_root(top))
    return roots


def module_file(name: str) -> str:
    return str(getattr(sys.modules.get(name), "__file__", None) or "")


def hook_changes(config: pytest.Config, before: dict[str, Any], roots: list[Path]) -> list[str]:
    pm = config.pluginmanager
    now = relay(pm)
    callers = before["callers"].items()
    found = [f"hook {n} replaced" for n, c in callers if now["callers"].get(n) is not c]
    code = code_of(now["exec"])
    if now["exec"] is not before["exec"] and not (code and allowed(code, roots)):
        found.append("the plugin manager's hook runner replaced")
    for name, caller in now["callers"].items():
        for impl in caller.get_hookimpls():
            code = code_of(impl.function)
            if code is None or not allowed(code, roots):
                where = code.co_filename if code else repr(impl.function)
                found.append(f"hook {name} implemented by plugin {impl.plugin_name} in {where}")
    return found


def allowed(code: types.CodeType, roots: list[Path]) -> bool:
    path = Path(code.co_filename)
    return any(path == root or path.is_relative_to(root) for root in roots)


def digest(outcomes: dict[str, str]) -> str:
    """What the canary report says the evidence file held: the judge compares it with what it
    read, so a file rewritten once the session ended shows."""
    text = json.dumps(sorted(outcomes.items()), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()
