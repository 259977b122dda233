"""Where a project declares its tests' own dependencies, and what they are.

judge.yaml `test_extra` names the place, read from the base tree (nothing of it runs): an
extra of `[project.optional-dependencies]` or a `[dependency-groups]` group of pyproject.toml
(its `include-group`s followed, the project's references to its own extras resolved), an
extra of setup.cfg's `[options.extras_require]` or setup.py's `extras_require`, or their
`tests_require` (read by configparser and AST), a requirements file (`*.txt`, or the `*.in`
pip-tools compiled it from), `tox.ini` (the `deps` of its `[testenv]`), or `noxfile.py` (the
string arguments of `session.install` in a session named like a test session). `declared`
finds the first of those a project has, for `adopt`.
"""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path
from typing import Any, TypeGuard

from _gate.core.protocol import FailClosed
from _gate.core.pyproject import REQUIREMENT, extras, own_rows, read, table
from _gate.runs.build_config import called
from _gate.runs.markers import applies

NAMES = ("test", "tests", "testing", "dev")  # extras and groups, in the order adopt tries them
CATCH_ALL = ("dev",)  # a name for lint and docs tools as often as for the tests' own
FILES = (
    "requirements-test.txt",
    "test-requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "tests/requirements.txt",
    "requirements-dev.txt",
    "dev-requirements.txt",
)
TOX, NOX = "tox.ini", "noxfile.py"
FACTOR = re.compile(r"^[\w.,!-]+:\s*")  # tox's `py38: mock`: the line applies to some envs
NOX_SESSIONS = ("test", "tests", "testing", "unit", "pytest")


def names(rows: list[str]) -> list[str]:
    """The distribution names of the rows that apply here (`greenlet ; python_version <
    "3.11"` does not on 3.11: the judge's environments do not hold it)."""
    return [m.group(1) for m in map(REQUIREMENT.match, filter(applies, rows)) if m]


def test_requirements(tree: Path, extra: str) -> list[str]:
    """The distribution names `extra` (judge.yaml test_extra) declares in the base tree."""
    if not extra:
        return []
    if extra.endswith((".txt", ".in")) or extra in (TOX, NOX):
        path = tree / extra
        if not path.is_file():
            raise FailClosed(f"{extra}: no such file in the base (judge.yaml test_extra)")
        return names(file_requirements(path))
    data = read(tree)
    if data is None:
        raise FailClosed(
            f"pyproject.toml of the base does not parse as TOML (test_extra {extra!r})"
        )
    found = pyproject_requirements(data, extra)
    if found is None:
        found = setuptools_extras(tree).get(extra)
    if found is None:
        raise FailClosed(
            f"pyproject.toml of the base: no extra or dependency group {extra!r} (judge.yaml "
            "test_extra); name one of [project.optional-dependencies], [dependency-groups], "
            f"setup.cfg's or setup.py's extras_require, or {TESTS_REQUIRE}"
        )
    return names(found)


def declared(tree: Path) -> tuple[str, list[str]]:
    """The first place the project declares its tests' dependencies (a test_extra) and its
    requirements; ("", []) where it declares none."""
    data = read(tree) or {}
    for name in NAMES:
        found = pyproject_requirements(data, name)
        if found is not None:
            return name, found
    setuptools = setuptools_extras(tree)
    for name in (*NAMES, TESTS_REQUIRE):
        if setuptools.get(name):
            return name, setuptools[name]
    for rel in (*(source_of(rel, tree) for rel in FILES), TOX, NOX):
        rows = file_requirements(tree / rel) if (tree / rel).is_file() else []
        if rows:
            return rel, rows
    return "", []


def source_of(rel: str, tree: Path) -> str:
    """pip-tools' layout: `tests.txt` compiled from `tests.in` beside it. The `.in` holds the
    tests' own requirements; the `.txt` pins everything under them for another toolchain
    (`packaging==21.3` via an old pytest), which would pin the gate's own tools and the build
    backend's imports with them."""
    compiled = rel.removesuffix(".txt") + ".in"
    return compiled if (tree / compiled).is_file() else rel


def pyproject_requirements(data: dict[str, Any], name: str) -> list[str] | None:
    """An extra's or a dependency group's rows, the project's references to its own extras
    resolved (`pkg[index]`: the rows of `index`; the judge installs the project itself)."""
    project = table(data, "project")
    project = project if isinstance(project, dict) else {}
    groups = table(data, "dependency-groups")
    if name in extras(project):
        return own_rows(extras(project)[name], project)
    if isinstance(groups, dict) and name in groups:
        return own_rows(group(groups, name, set()), project)
    return None


def file_requirements(path: Path) -> list[str]:
    text = path.read_bytes().decode("utf-8", "replace")
    if path.name == TOX:
        return tox_requirements(text)
    if path.name == NOX:
        return nox_requirements(text)
    return requirement_lines(text)


def requirement_lines(text: str) -> list[str]:
    """A requirements file's requirements: not its comments, options (`-r`, `-e .`) or blanks."""
    rows = (line.split(" #", 1)[0].strip() for line in text.splitlines())
    return [row for row in rows if row and not row.startswith(("#", "-"))]


def group(groups: dict[str, Any], name: str, seen: set[str]) -> list[str]:
    """A dependency group's requirements, its `{include-group = ...}` entries followed."""
    rows: list[str] = []
    for row in groups.get(name) or []:
        if isinstance(row, str):
            rows.append(row)
        elif isinstance(row, dict) and row.get("include-group") not in seen | {None}:
            rows += group(groups, str(row["include-group"]), seen | {name})
    return rows


def tox_requirements(text: str) -> list[str]:
    """`deps` of tox.ini's [testenv]: each line without its factor prefix; substitutions
    (`{[base]deps}`) and options (`-r file`) are not requirements."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    lines = parser.get("testenv", "deps", fallback="").splitlines()
    rows = [FACTOR.sub("", line.split(" #", 1)[0]).strip() for line in lines]
    return [row for row in rows if row and not row.startswith(("#", "-", "{", "."))]


def nox_requirements(text: str) -> list[str]:
    """The string arguments of `session.install(...)` in noxfile.py's test sessions (read,
    never run): `session.install("pytest", "pytest-mock")`; options and `.` are not."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    rows: list[object] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or function.name not in NOX_SESSIONS:
            continue
        for call in ast.walk(function):
            if installs(call):
                rows += [a.value for a in call.args if isinstance(a, ast.Constant)]
    return [r for r in rows if isinstance(r, str) and not r.startswith(("-", "."))]


def installs(node: ast.AST) -> TypeGuard[ast.Call]:
    """Whether `node` is a call of some `session.install`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "install"
    )


TESTS_REQUIRE = "tests_require"  # setuptools' own list of test dependencies, as an extra's name


def setuptools_extras(tree: Path) -> dict[str, list[str]]:
    """The extras setuptools declares, and its `tests_require` under that name: setup.cfg's
    [options.extras_require] and [options] tests_require, else the literal `extras_require`
    and `tests_require` arguments of setup.py's `setup(...)` (read by AST, never run; a name
    bound once at the top of the module to a literal is followed)."""
    found = setup_cfg_extras(tree / "setup.cfg")
    return found or setup_py_extras(tree / "setup.py")


def setup_cfg_extras(path: Path) -> dict[str, list[str]]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(path.read_bytes().decode("utf-8", "replace"))
    except (OSError, configparser.Error):
        return {}
    found = {
        name: requirement_lines(value)
        for name, value in (
            parser.items("options.extras_require")
            if parser.has_section("options.extras_require")
            else []
        )
    }
    tests = parser.get("options", TESTS_REQUIRE, fallback="")
    return {**found, **({TESTS_REQUIRE: requirement_lines(tests)} if tests.strip() else {})}


def setup_py_extras(path: Path) -> dict[str, list[str]]:
    try:
        module = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return {}
    bound = {
        node.targets[0].id: node.value
        for node in module.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    }
    found: dict[str, list[str]] = {}
    for call in ast.walk(module):
        if not (isinstance(call, ast.Call) and called(call) == "setup"):
            continue
        for keyword in call.keywords:
            value = literal(keyword.value, bound)
            if keyword.arg == "extras_require" and isinstance(value, dict):
                found |= {str(k): strings(v) for k, v in value.items()}
            elif keyword.arg == TESTS_REQUIRE:
                found[TESTS_REQUIRE] = strings(value)
    return found


def literal(node: ast.expr, bound: dict[str, ast.expr], depth: int = 8) -> object:
    """The value of a literal, its names bound at the top of the module followed (a few
    levels: `extras_require={"test": TESTS}`); None for anything computed."""
    if depth == 0:
        return None
    if isinstance(node, ast.Name):
        return literal(bound[node.id], bound, depth - 1) if node.id in bound else None
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        named = {k.value: v for k, v in pairs if isinstance(k, ast.Constant) and k.value}
        return {k: literal(v, bound, depth - 1) for k, v in named.items()}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(item, bound, depth - 1) for item in node.elts]
    return node.value if isinstance(node, ast.Constant) else None


def strings(value: object) -> list[str]:
    """A requirement list's strings (a string of lines, as setuptools also takes)."""
    if isinstance(value, str):
        return requirement_lines(value)
    return (
        [row for row in value if isinstance(row, str)] if isinstance(value, (list, tuple)) else []
    )
