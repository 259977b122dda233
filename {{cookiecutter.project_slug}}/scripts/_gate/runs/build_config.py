"""The build configuration: what runs while a tree is built and decides what its wheel holds.

A patch that changes it changes what the gate judges, not what users run, so the write-set
step gives it `needs-review` like the oracle (docs/build-provenance.md):
- the tables of pyproject.toml that pick the backend or map files into the wheel
  (`BUILD_TABLES`), compared as parsed TOML, so a dotted key, an inline table or a
  reformatting is the same table;
- the files a build runs or reads for that mapping: setup.py, MANIFEST.in, the hooks hatch
  and pdm load by name, and those pyproject.toml names (an in-tree backend's module under
  `backend-path`, a hatch custom hook's `path`, poetry's and pdm's build scripts).
Version bumps, dependencies, metadata and other tool tables stay ordinary changes: in
setup.py too, where an edit that changes only literal metadata arguments of `setup()`
(`SETUP_METADATA`) is source, and in setup.cfg, where one that changes only `[metadata]` or
the sections of lint and release tools (`TOOL_SECTIONS`) is.
"""

from __future__ import annotations

import ast
import configparser
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from _gate.core.pyproject import PYPROJECT, parsed, table
from _gate.runs.git import git, show_file

RULE = "build configuration"
# Root files a build runs or reads to decide the wheel's files, whatever pyproject.toml says
# (pdm-backend loads pdm_build.py by its name; hatch_build.py is hatch's default hook path).
BUILD_FILES = ("setup.py", "setup.cfg", "MANIFEST.in", "hatch_build.py", "pdm_build.py")
# pyproject.toml tables, by dotted name, that pick the backend or map files into the wheel;
# a tuple after the name lists keys of that table that stay ordinary (metadata).
BUILD_TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("build-system", ()),
    ("tool.setuptools", ("dynamic",)),
    ("tool.hatch.build", ()),
    ("tool.hatch.metadata.hooks", ()),
    ("tool.flit.module", ()),
    ("tool.flit.external-data", ()),
    ("tool.poetry.packages", ()),
    ("tool.poetry.include", ()),
    ("tool.poetry.exclude", ()),
    ("tool.poetry.build", ()),
    ("tool.pdm.build", ()),
    ("tool.scikit-build", ()),
    ("tool.maturin", ()),
    ("tool.meson-python", ()),
)
HATCH_HOOK = "hatch_build.py"


@dataclass(frozen=True)
class BuildConfig:
    """One revision's build configuration: its build tables and the paths of its build files
    (a path ending in "/" is a folder)."""

    tables: Mapping[str, object]
    files: frozenset[str]


def build_config(data: Mapping[str, Any]) -> BuildConfig:
    tables: dict[str, object] = {}
    for name, ordinary in BUILD_TABLES:
        found = table(data, name)
        if isinstance(found, Mapping):
            found = {k: v for k, v in found.items() if k not in ordinary}
        if found not in (None, {}):
            tables[name] = found
    return BuildConfig(tables, frozenset([*BUILD_FILES, *named_files(data)]))


def named_files(data: Mapping[str, Any]) -> Iterable[str]:
    """The build files pyproject.toml names: an in-tree backend, hooks, build scripts."""
    backend = str(table(data, "build-system.build-backend") or "").split(":")[0]
    top = backend.split(".")[0]
    for folder in strings(table(data, "build-system.backend-path")):
        base = folder.strip("/").removeprefix("./")
        prefix = f"{base}/" if base not in ("", ".") else ""
        if top:
            yield from (f"{prefix}{top}.py", f"{prefix}{top}/")
    for hooks in hatch_hook_tables(data):
        custom = hooks.get("custom")
        if isinstance(custom, Mapping):
            yield str(custom.get("path", HATCH_HOOK))
    poetry = table(data, "tool.poetry.build")
    yield from strings(poetry.get("script") if isinstance(poetry, Mapping) else poetry)
    yield from strings(table(data, "tool.pdm.build.setup-script"))


def hatch_hook_tables(data: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    targets = table(data, "tool.hatch.build.targets")
    each = list(targets.values()) if isinstance(targets, Mapping) else []
    for found in [table(data, "tool.hatch.build"), table(data, "tool.hatch.metadata"), *each]:
        hooks = found.get("hooks") if isinstance(found, Mapping) else None
        if isinstance(hooks, Mapping):
            yield hooks


def strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def at(repo: Path, rev: str) -> BuildConfig | None:
    """The build configuration of `rev`; None where its pyproject.toml does not parse."""
    data = parsed(show_file(repo, rev, PYPROJECT))
    return None if data is None else build_config(data)


def metadata_edits(repo: Path, base: str, head: str, paths: Iterable[str]) -> set[str]:
    """The setup.py and setup.cfg among `paths` whose edits are metadata alone: source, though
    a build reads them and judge.yaml protects setup.cfg as pytest's configuration (neither
    reads what changed)."""
    return {path for path in paths if metadata_only(repo, base, head, path)}


def build_changes(repo: Path, base: str, head: str, paths: Iterable[str]) -> dict[str, str]:
    """The written paths that change the build configuration, each with its rule: a build
    file of the base or of any revision of the branch, and pyproject.toml where one of its
    build tables differs from the base's in any revision that wrote it."""
    before = at(repo, base) or BuildConfig({}, frozenset(BUILD_FILES))
    written = list(paths)
    revisions = git(repo, "rev-list", f"{base}..{head}", "--", PYPROJECT).split()
    configs = [at(repo, rev) for rev in revisions] if PYPROJECT in written else []
    files = set(before.files).union(*(c.files for c in configs if c is not None))
    found = {path: RULE for path in written if is_build_file(path, files)}
    tables = changed_tables(before, configs)
    if tables:
        found[PYPROJECT] = f"{RULE} {tables}"
    return found


def is_build_file(path: str, files: Iterable[str]) -> bool:
    return any(path == f or (f.endswith("/") and path.startswith(f)) for f in files)


def changed_tables(before: BuildConfig, after: Iterable[BuildConfig | None]) -> str:
    """`[build-system]`: the build tables some revision changed (or `[...] unparsed`)."""
    names: set[str] = set()
    for config in after:
        if config is None:
            return "(pyproject.toml does not parse)"
        names.update(
            name for name, _ in BUILD_TABLES if config.tables.get(name) != before.tables.get(name)
        )
    return ", ".join(f"[{name}]" for name, _ in BUILD_TABLES if name in names)


# setup() arguments that only fill the wheel's METADATA: changing their literal values changes
# what the project says about itself, never what its build runs or packs.
SETUP_METADATA = frozenset(
    {
        "version",
        "description",
        "long_description",
        "long_description_content_type",
        "classifiers",
        "url",
        "project_urls",
        "author",
        "author_email",
        "maintainer",
        "maintainer_email",
        "license",
        "keywords",
        "platforms",
        "python_requires",
    }
)


def metadata_only(repo: Path, base: str, head: str, path: str) -> bool:
    """Whether every revision of the branch that wrote setup.py (or setup.cfg) differs from
    the base's only in metadata: literal SETUP_METADATA arguments of setup(), or setup.cfg's
    [metadata] section and tool sections. A file the base lacks, or one that does not parse,
    is never."""
    shape = {"setup.py": setup_py_shape, "setup.cfg": setup_cfg_shape}.get(path)
    before = show_file(repo, base, path) if shape else None
    if shape is None or before is None:
        return False
    revisions = git(repo, "rev-list", f"{base}..{head}", "--", path).split()
    want = shape(before)
    return want is not None and all(
        (text := show_file(repo, rev, path)) is not None and shape(text) == want
        for rev in revisions
    )


def setup_py_shape(text: bytes) -> str | None:
    """setup.py's AST without the literal metadata arguments of setup() (one added or
    removed is metadata too)."""
    try:
        module = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and called(node) == "setup":
            node.keywords = [
                k for k in node.keywords if not (k.arg in SETUP_METADATA and is_literal(k.value))
            ]
    return ast.dump(module)


def called(call: ast.Call) -> str:
    """The name a call calls: `setup` of `setup(...)` and of `setuptools.setup(...)`."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False
    return True


# setup.cfg sections neither setuptools nor pytest reads: lint, type-check and release tools'
# own (Flask adds a flake8 ignore there). Any other section may be a command's options that a
# build runs (`[bdist_wheel]`, `[build_py]`), or pytest's (`[tool:pytest]`): it stays guarded.
TOOL_SECTIONS = (
    "flake8",
    "pycodestyle",
    "pep8",
    "pydocstyle",
    "pyflakes",
    "pylint",
    "pylint.*",
    "mypy",
    "mypy-*",
    "isort",
    "tool:isort",
    "coverage:*",
    "bumpversion",
    "bumpversion:*",
    "codespell",
    "darglint",
    "doc8",
    "yapf",
    "zest.releaser",
    "check-manifest",
)


def setup_cfg_shape(text: bytes) -> str | None:
    """setup.cfg's sections as parsed, but [metadata] and the sections of TOOL_SECTIONS."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text.decode("utf-8"))
    except (UnicodeDecodeError, configparser.Error):
        return None
    kept = {
        name: dict(parser.items(name))
        for name in parser.sections()
        if name != "metadata" and not any(fnmatchcase(name, tool) for tool in TOOL_SECTIONS)
    }
    return repr(sorted(kept.items()))
