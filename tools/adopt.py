"""Adopt the oracle gate in an existing repository, on a new branch for review.

    python3 dev.py adopt PATH [--owners "@org/team"] [--command NAME] [--tests P ...]
        [--branch oracle-gate] [--ci github|none] [--wheelhouse DIR]

The gate's code owners are `--owners`, else the owners the project's CODEOWNERS gives every
file (its `*` rule), else its most frequent ones; with neither, adopt stops and says so.

Reads the project as pip sees it: a wheel built in a temporary folder gives the console scripts
(the cassettes' `command`), the runtime dependencies and the package, whatever the build
backend (pyproject.toml or a setup.py); `[build-system] requires` gives the backend. Compiles
scripts/requirements-judge.txt with hashes (the judge's tools, the backend and the runtime
dependencies; `uv pip compile --universal --generate-hashes`) and fills the wheelhouse, the
only two steps that use the package index. Builds the project from that wheelhouse as the judge
does and asks pytest what it collects (with root files such as `test.py` named explicitly,
since pytest's default `python_files` skips them): judge.yaml's `tests:` are pytest's own
`testpaths` and the folders and root files of the node ids it prints, never another line of its
output. Bakes the template without its example using these answers and adds the gate's files
that are missing, with a manual (oracle/README.md) written for this project's layout, paths and
commands; a file that exists is never overwritten (CODEOWNERS and .gitignore get only their
missing lines; an existing noxfile.py is kept and the gate's sessions go to noxfile_oracle.py).
Writes fixtures.lock, creates the oracle ref and commits everything on `--branch`. Then checks
its work: a `--help` case, and a no-op patch and a patch that touches a test file judged on the
branch, in a clone; both must merge. Rerunning finds nothing to add and changes nothing, and
says so (the branch merged: nothing left to do).

Exit codes: 0 adopted, or nothing left to add; 2 cannot adopt (one line says why: not a clean
git repository, no console script, a build or a collection that fails, a check that does not
merge).
"""

from __future__ import annotations

import argparse
import configparser
import dataclasses
import fnmatch
import glob
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.parser import Parser
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
from cookiecutter.exceptions import CookiecutterException

from tools.bakery import OFFLINE, TEMPLATE, bake, judge_script, load_hook

SCRIPTS = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"
sys.path.insert(0, str(SCRIPTS))
from _gate.core.patterns import PLACEHOLDER_OWNER as PLACEHOLDER  # noqa: E402
from _gate.core.protocol import FailClosed  # noqa: E402
from _gate.core.pyproject import REQUIREMENT  # noqa: E402
from _gate.runs import test_deps  # noqa: E402
from _gate.runs.envs import build_env, error_line  # noqa: E402

BRANCH = "oracle-gate"
GATE_NOXFILE = "noxfile_oracle.py"
JUDGE_TOOLS = ("pyyaml", "pytest", "hypothesis", "uv")  # what the judge's envs always hold
GATE_TOOLS = ("pyyaml", "hypothesis", "uv")  # the gate's alone: today's, whatever --as-of says
# What the gate's pytest plugin needs of an older pytest: StashKey (7.0), new-style wrappers.
PLUGIN_FLOOR = ["pytest>=7.0", "pluggy>=1.2"]
LEGACY_BACKEND = ("setuptools>=40.8.0",)  # PEP 517's fallback for a project without one
# What the bake brings that an existing project already has, or that is the example's own;
# the gate's manual (README.md and its docs/ pages) goes under oracle/ instead (add_manual).
NOT_ADOPTED = ("src", "tests", "pyproject.toml", "README.md", "docs", "Makefile", "fixtures.lock")
MANUAL = "oracle"
CACHES = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
MERGED = ("CODEOWNERS", ".gitignore")  # missing lines appended, never rewritten
ROOT_TESTS = ("test*.py", "*_test.py", "tests.py")
# Where pytest reads its configuration at the root, in its order: (file, section); pytest.ini
# is the configuration even without a section, the others only with theirs.
PYTEST_CONFIGS = (
    ("pytest.ini", "pytest"),
    (".pytest.ini", "pytest"),
    ("pyproject.toml", "tool.pytest"),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)
TEST_FOLDER = re.compile(r"(tests?|testing)([_-].*)?|.*[_-]tests?")  # tests, test_unit, ...
README = Path(__file__).with_name("adopted_readme.md.jinja")  # the adopted oracle/README.md
FIRST_CHANGE = "try-the-gate-on-a-first-change"  # its heading the bake's six steps become
# The patches adopt's check judges: a no-op one, and one appending this line to a test file.
NO_OP = "a no-op patch"
TOUCH = b"# A patch that touches a test file: oracle-template adopt's check of the gate.\n"


class AdoptError(Exception):
    """Cannot adopt: one line, exit 2."""


@dataclass(frozen=True)
class Project:
    name: str
    package: str
    commands: tuple[str, ...]
    dependencies: tuple[str, ...]
    backend: tuple[str, ...]
    test_extra: str = ""  # judge.yaml test_extra: an extra, a dependency group or a file
    test_dependencies: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()  # the wheel's top-level folders: the project's code
    targets: tuple[tuple[str, str], ...] = ()  # console scripts: (name, "module:function")
    as_of: str = ""  # RFC 3339: its own requirements resolved as they were then (--as-of)


@dataclass(frozen=True)
class Collected:
    """What pytest collects on a build made as the judge makes it."""

    files: tuple[str, ...]  # the files of the node ids it printed, relative to the root
    missing: bool  # a module failed to import for a module that is not installed


def run(cmd: Sequence[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> str:
    """`cmd`'s output; a failure is an AdoptError naming `what` and its last line."""
    proc = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        text = f"{proc.stdout}\n{proc.stderr}"
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        lines = [line for line in lines if not line.startswith("hint:")]  # uv's advice
        why = error_line(text) or (lines[-1] if lines else f"exit {proc.returncode}")
        raise AdoptError(f"{what} failed: {why}")
    return proc.stdout


def git(repo: Path, *args: str) -> str:
    return run(["git", *args], repo, f"git {args[0]}").strip()


def clean_branch(repo: Path) -> str:
    if not (repo / ".git").exists():
        raise AdoptError(f"{repo}: not the top of a git repository")
    if git(repo, "status", "--porcelain"):
        raise AdoptError(f"{repo}: uncommitted changes; commit or stash them first")
    head = ["git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}"]
    if subprocess.run(head, cwd=repo, capture_output=True, check=False).returncode != 0:
        raise AdoptError(f"{repo}: no commit yet; commit the project first")
    branch = git(repo, "branch", "--show-current")
    if not branch:
        raise AdoptError(f"{repo}: HEAD is detached; check out the branch patches merge into")
    return branch


def export(repo: Path, dest: Path) -> Path:
    """The project as committed, in a clone of its own: with the history and tags that
    setuptools-scm, hatch-vcs and versioneer read a version from (an archive has none)."""
    git(repo.parent, "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(dest))
    git(dest, "checkout", "--quiet", "--detach", git(repo, "rev-parse", "HEAD"))
    return dest


def read_project(repo: Path, tmp: Path) -> Project:
    """What the project's own build says: console scripts, dependencies, top-level package."""
    out = tmp / "wheel"
    run(["uv", "build", "--wheel", "--out-dir", str(out), str(repo)], repo, "building a wheel")
    wheel = next(out.glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        entry_points = (
            zf.read(f"{info}/entry_points.txt").decode()
            if (f"{info}/entry_points.txt" in names)
            else ""
        )
    tops = {n.split("/")[0] for n in names if "/" in n}
    packages = sorted(top for top in tops if not top.endswith((".dist-info", ".data")))
    return Project(
        name=metadata["Name"],
        package=(packages or [metadata["Name"].replace("-", "_")])[0],
        commands=console_scripts(entry_points),
        dependencies=tuple(
            r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r
        ),
        backend=build_requires(repo),
        packages=tuple(packages),
        targets=console_targets(entry_points),
    )


def console_scripts(entry_points: str) -> tuple[str, ...]:
    return tuple(name for name, _ in console_targets(entry_points))


def console_targets(entry_points: str) -> tuple[tuple[str, str], ...]:
    """entry_points.txt's console scripts: (name, "module:function")."""
    section, found = "", []
    for line in entry_points.splitlines():
        if line.startswith("["):
            section = line.strip("[] ")
        elif section == "console_scripts" and "=" in line:
            name, target = line.split("=", 1)
            found.append((name.strip(), target.strip()))
    return tuple(found)


def read_toml(path: Path) -> dict[str, Any]:
    # tomllib is 3.11+; the adopt session installs tomli on 3.10.
    toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    data: dict[str, Any] = toml.loads(path.read_text("utf-8"))
    return data


def build_requires(repo: Path) -> tuple[str, ...]:
    pyproject = repo / "pyproject.toml"
    if not pyproject.exists():
        return LEGACY_BACKEND
    data = read_toml(pyproject)
    return tuple(data.get("build-system", {}).get("requires", LEGACY_BACKEND))


def pick_command(project: Project, wanted: str | None) -> str:
    if wanted:
        return wanted
    if not project.commands:
        raise AdoptError(
            f"{project.name} has no console script; the cassettes run one: add one to "
            "[project.scripts] (or entry_points), or pass --command (a library: --command "
            "python, and cases such as `nox -s case -- -- -c 'import pkg; print(pkg.f(1))'`)"
        )
    same = [c for c in project.commands if c.replace("_", "-") == project.name.lower()]
    return (same or list(project.commands))[0]


def test_dependencies(source: Path) -> tuple[str, tuple[str, ...]]:
    """The tests' own dependencies and where the project declares them (judge.yaml's
    test_extra): scripts/_gate/runs/test_deps.py, the reader the judge uses too."""
    where, rows = test_deps.declared(source)
    return where, tuple(rows)


def compile_requirements(project: Project, dest: Path, tmp: Path) -> None:
    """Hash-pinned: the judge installs only these, from the wheelhouse."""
    wanted = tmp / "judge.in"
    own = [*project.dependencies, *project.test_dependencies]
    # With --as-of, the tests' own pytest too (Flask's conftest.py of 2022 imports a name
    # pytest 8 dropped), never older than the gate's plugin needs.
    named = {found.group(1) for found in map(REQUIREMENT.match, own) if found}
    dated = sorted(named - set(GATE_TOOLS)) if project.as_of else []
    floor = PLUGIN_FLOOR if "pytest" in dated else []
    rows = [*JUDGE_TOOLS, *project.backend, *own, *floor]
    wanted.write_text("\n".join(rows) + "\n")
    cmd = ["uv", "pip", "compile", "--universal", "--generate-hashes", "--python-version"]
    cmd += ["3.10", "--no-header", "--quiet", str(wanted), "-o", str(dest)]
    cmd += [f"--exclude-newer-package={name}={project.as_of}" for name in dated]
    run(cmd, tmp, "compiling scripts/requirements-judge.txt")
    note = (
        "# Hash-pinned tools, build backend and runtime dependencies of the judge's environments,\n"
        f"# installed only from the local wheelhouse. Compiled by oracle-template's adopt from:\n"
        f"#   {' '.join(rows)}\n"
    )
    if dated:
        note += f"# with {', '.join(dated)} as they were on {project.as_of} (adopt --as-of)\n"
    dest.write_text(note + dest.read_text())


def fill_wheelhouse(bake_dir: Path, wheelhouse: Path, tmp: Path) -> None:
    cmd = [sys.executable, str(bake_dir / "scripts/wheelhouse.py"), "--dest", str(wheelhouse)]
    cmd += ["--requirements", str(bake_dir / "scripts/requirements-judge.txt")]
    run([*cmd, "--report", str(tmp / "wheelhouse.json")], bake_dir, "filling the wheelhouse")


def collected_tests(repo: Path, bake_dir: Path, wheelhouse: Path, tmp: Path) -> Collected:
    """What pytest collects on a build made as the judge makes it: the layout as pytest sees
    it, not as a naming convention guesses it."""
    return collect(
        build_env(repo, tmp, wheelhouse, bake_dir / "scripts/requirements-judge.txt"), repo
    )


def collect(python: Path, repo: Path) -> Collected:
    """`pytest --collect-only -q` in `repo` with `python`, as it is configured, then with the
    root files its default `python_files` skips named explicitly (`test.py`)."""
    roots = sorted({p.name for pattern in ROOT_TESTS for p in repo.glob(pattern) if p.is_file()})
    found: set[str] = set()
    missing = False
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)  # the project's configuration, not this shell's
    for targets in ([], roots) if roots else ([],):
        cmd = [str(python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        proc = subprocess.run(
            [*cmd, *targets], cwd=repo, env=env, capture_output=True, text=True, check=False
        )
        found.update(node_files(repo, proc.stdout))
        missing = missing or "No module named" in proc.stdout + proc.stderr
    return Collected(tuple(sorted(found)), missing)


def node_files(repo: Path, output: str) -> set[str]:
    """The files of the node ids in pytest's `--collect-only -q` output: a line of its own,
    `path::name` with no leading whitespace, whose path is a file of the project. Never another
    line holding `::`, such as a warning's text in the warnings summary."""
    found = set()
    for line in output.splitlines():
        path, sep, _ = line.partition("::")
        if not sep or not path or path != path.strip():
            continue
        rel = PurePosixPath(path)
        if rel.is_absolute() or ".." in rel.parts or not (repo / rel).is_file():
            continue
        found.add(rel.as_posix())
    return found


def configured_testpaths(repo: Path) -> list[str]:
    """pytest's own `testpaths`, from the file it reads its configuration from at the root
    (PYTEST_CONFIGS: the first that holds its section), each glob expanded as pytest expands
    it and kept where it names a file or folder of the project."""
    for name, section in PYTEST_CONFIGS:
        path = repo / name
        if not path.is_file():
            continue
        if name == "pyproject.toml":
            try:
                table = read_toml(path).get("tool", {}).get("pytest")
            except ValueError:  # tomllib's error is one: pytest would stop on it too
                continue
            if not isinstance(table, dict):
                continue
            # [tool.pytest.ini_options], else pytest 9's own [tool.pytest] table.
            options = table["ini_options"] if isinstance(table.get("ini_options"), dict) else table
            value = options.get("testpaths", [])
            paths = shlex.split(value) if isinstance(value, str) else [str(v) for v in value]
        else:
            ini = configparser.ConfigParser(interpolation=None)
            try:
                ini.read_string(path.read_text("utf-8", "replace"), str(path))
            except configparser.Error:
                continue
            if not ini.has_section(section):
                if name.endswith("pytest.ini"):
                    return []
                continue
            paths = shlex.split(ini.get(section, "testpaths", fallback=""))
        return [found for pattern in paths for found in inside(repo, pattern)]
    return []


def inside(repo: Path, pattern: str) -> list[str]:
    """The files and folders of the project a `testpaths` entry names (a glob, as pytest
    reads it), relative to the root."""
    found = []
    for match in sorted(glob.glob(pattern, root_dir=repo, recursive=True)):
        rel = PurePosixPath(Path(match).as_posix())
        if rel.parts and not rel.is_absolute() and ".." not in rel.parts:
            found.append(rel.as_posix())
    return found


def tests_entries(source: Path, files: Iterable[str], packages: Iterable[str]) -> list[str]:
    """judge.yaml's `tests:` for the files pytest collected in `source`, whose code is `src`
    and the wheel's `packages` (test_layout)."""
    return test_layout(files, configured_testpaths(source), {"src", *packages})


def test_layout(files: Iterable[str], testpaths: Sequence[str], code: Collection[str]) -> list[str]:
    """judge.yaml's `tests:` from the files pytest collected: for each, the `testpaths` entry
    it is under (one that holds the code itself, `src` or a package, aside); else its folder
    at the root, or, in a folder of the code, the test folder it is in (`src/pkg/tests`) or the
    file itself where it is named as a test; a root file named as a test. A module of the code
    that pytest collects doctests from is not a test path: the write-set would give every change
    of it the tests' treatment."""
    kept = [path for path in testpaths if not holds_code(path, code)]
    entries = set()
    for file in files:
        under = [path for path in kept if file == path or file.startswith(path + "/")]
        parts = PurePosixPath(file).parts
        folders = [i for i, part in enumerate(parts[:-1]) if TEST_FOLDER.fullmatch(part)]
        if under:
            entries.add(min(under, key=len))
        elif len(parts) > 1 and parts[0] not in code:
            entries.add(parts[0])
        elif folders:
            entries.add("/".join(parts[: folders[0] + 1]))
        elif any(fnmatch.fnmatch(parts[-1], pattern) for pattern in ROOT_TESTS):
            entries.add(file)
    return sorted(entries)


def holds_code(path: str, code: Collection[str]) -> bool:
    """Whether a folder is of the project's code and not a test folder inside it."""
    parts = PurePosixPath(path).parts
    tests = any(TEST_FOLDER.fullmatch(part) for part in parts)
    return not parts or (parts[0] in code and not tests and "." not in parts[-1])


def with_test_dependencies(
    project: Project, source: Path, bake_dir: Path, wheelhouse: Path, tmp: Path
) -> tuple[Project, Collected]:
    """The project with the test dependencies the judge will pin and install (compiled into
    the bake's requirements-judge.txt, the wheelhouse filled), and what pytest collects. A
    catch-all `dev` list (as often lint and docs tools as the tests') is kept only where the
    tests do not collect without it."""
    if project.test_extra in test_deps.CATCH_ALL:
        bare = dataclasses.replace(project, test_extra="", test_dependencies=())
        collected = pinned(bare, source, bake_dir, wheelhouse, tmp / "env-bare")
        if not collected.missing:
            return bare, collected
    return project, pinned(project, source, bake_dir, wheelhouse, tmp / "env")


def pinned(
    project: Project, source: Path, bake_dir: Path, wheelhouse: Path, env: Path
) -> Collected:
    """Compile and fetch what the judge installs for `project`, then collect its tests."""
    compile_requirements(project, bake_dir / "scripts/requirements-judge.txt", env.parent)
    fill_wheelhouse(bake_dir, wheelhouse, env.parent)
    return collected_tests(source, bake_dir, wheelhouse, env)


def noxfile_name(repo: Path, bake_dir: Path) -> str:
    """noxfile.py unless the project has its own: one that does not open as the gate's does
    (an adopted repository's noxfile.py is the gate's, so adopting again changes nothing)."""
    own = repo / "noxfile.py"
    if not own.exists():
        return "noxfile.py"
    heading = (bake_dir / "noxfile.py").read_text("utf-8").splitlines()[0]
    return "noxfile.py" if own.read_text("utf-8").splitlines()[:1] == [heading] else GATE_NOXFILE


def strength_paths(source: Path, package: str) -> list[str]:
    """The code `nox -s strength` mutates: `src` for a src layout, else the package itself."""
    if (source / "src" / package).exists():
        return ["src"]
    found = [p for p in (package, f"{package}.py") if (source / p).exists()]
    return found[:1] or ["src"]


def render(bake_dir: Path, tests: Sequence[str], gate_noxfile: str, mutated: list[str]) -> None:
    """The settings a bake cannot know: the tests' and the code's layout, where the sessions
    live."""
    judge_yaml = bake_dir / "oracle/judge.yaml"
    replace_once(judge_yaml, "tests: [tests]", f"tests: {json.dumps(tests)}")
    replace_once(judge_yaml, "strength_paths: [src]", f"strength_paths: {json.dumps(mutated)}")
    if gate_noxfile == "noxfile.py":
        return
    (bake_dir / "noxfile.py").rename(bake_dir / gate_noxfile)
    replace_once(bake_dir / "oracle/judge.yaml", "- /noxfile.py\n", f"- /{gate_noxfile}\n")
    replace_once(bake_dir / "CODEOWNERS", "/noxfile.py ", f"/{gate_noxfile} ")
    workflow = bake_dir / ".github/workflows/oracle.yml"
    if workflow.exists():
        text = workflow.read_text("utf-8").replace("nox -s ", f"nox -f {gate_noxfile} -s ")
        workflow.write_text(text, "utf-8")


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    if text.count(old) != 1:
        raise AdoptError(f"{path.name}: the template changed; expected one {old!r}")
    path.write_text(text.replace(old, new), "utf-8")


def bake_files(bake_dir: Path) -> Iterable[Path]:
    """The bake's files that adopt copies: not the ones it leaves out, nor the caches a run of
    the template's scripts or tools in this checkout left beside them (cookiecutter copies
    whatever the template folder holds)."""
    for path in sorted(bake_dir.rglob("*")):
        rel = path.relative_to(bake_dir)
        if rel.parts[0] in (".git", *NOT_ADOPTED) or CACHES.intersection(rel.parts):
            continue
        if path.is_file() and path.suffix != ".pyc":
            yield rel


def rule_key(line: str) -> str:
    """What makes a line the same rule: a CODEOWNERS path pattern whoever owns it, a
    .gitignore pattern as written."""
    return line.split()[0] if line.split() else ""


def merge_lines(source: Path, target: Path) -> bool:
    """Append the source's rules whose pattern the target lacks, under one comment line."""
    have = {rule_key(line) for line in target.read_text("utf-8").splitlines()}
    missing = [
        line
        for line in source.read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#") and rule_key(line) not in have
    ]
    if missing:
        text = target.read_text("utf-8").rstrip("\n")
        note = "# The oracle gate's rules (oracle-template adopt; see oracle/README.md)."
        target.write_text("\n".join([text, "", note, *missing]) + "\n", "utf-8")
    return bool(missing)


def owners_file(repo: Path, rel: Path) -> Path:
    """CODEOWNERS where the project keeps it (GitHub reads .github/, the root, then docs/,
    and only the first it finds); any other file where the bake has it."""
    if rel != Path("CODEOWNERS"):
        return rel
    kept = (Path(".github/CODEOWNERS"), rel, Path("docs/CODEOWNERS"))
    return next((path for path in kept if (repo / path).is_file()), rel)


def add_files(bake_dir: Path, repo: Path) -> list[str]:
    """Copy what is missing; merge line lists; never overwrite. Returns what changed."""
    changed = []
    for rel in bake_files(bake_dir):
        source, target = bake_dir / rel, repo / owners_file(repo, rel)
        if str(rel) in MERGED and target.exists():
            if merge_lines(source, target):
                changed.append(str(target.relative_to(repo)))
        elif not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            changed.append(str(rel))
    return changed + add_manual(bake_dir, repo)


def add_manual(bake_dir: Path, repo: Path) -> list[str]:
    """The gate's manual as oracle/README.md and oracle/docs/: away from the project's own
    README and docs/, and together, so the README's relative `docs/...` links resolve. A page
    that exists is never overwritten. Returns the pages added."""
    docs = sorted(p for p in (bake_dir / "docs").rglob("*") if p.is_file())
    added = []
    for rel in [Path("README.md"), *(p.relative_to(bake_dir) for p in docs)]:
        target = repo / MANUAL / rel
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(bake_dir / rel, target)
            added.append(target.relative_to(repo).as_posix())
    return added


def commit(repo: Path, branch: str, paths: Sequence[str]) -> None:
    """On a new branch, for review: the base branch itself is left as it was. Each of the
    gate's files is added even where a rule of the project's .gitignore matches it (Flask's
    `env*` matches scripts/_gate/runs/envs.py); tracked, it stays tracked."""
    git(repo, "checkout", "--quiet", "-b", branch)
    git(repo, "add", "--force", "--", *paths)
    git(repo, "commit", "--quiet", "--no-verify", "-m", "Adopt the oracle gate")


def gate_owners(repo: Path, given: str | None) -> str:
    """The gate's code owners: `--owners`, else those the project's CODEOWNERS gives every
    file (its `*` rule), else its most frequent owners; never the template's placeholder."""
    if given:
        return given
    kept = (Path(".github/CODEOWNERS"), Path("CODEOWNERS"), Path("docs/CODEOWNERS"))
    found = next((repo / path for path in kept if (repo / path).is_file()), None)
    lines = found.read_text("utf-8", "replace").splitlines() if found else []
    rules = [line.split() for line in lines if line.split() and not line.startswith("#")]
    rules = [rule for rule in rules if rule[1:] and PLACEHOLDER not in rule[1:]]
    everything = [" ".join(rule[1:]) for rule in rules if rule[0] == "*"]
    if everything:
        return everything[-1]
    if rules:
        return Counter(" ".join(rule[1:]) for rule in rules).most_common(1)[0][0]
    raise AdoptError(
        "no CODEOWNERS rule names the project's owners: pass --owners @org/team (the gate's "
        "code owners, who review a patch that touches it)"
    )


def adopt(args: argparse.Namespace) -> str:
    repo = args.path.resolve()
    base_branch = clean_branch(repo)
    if git(repo, "branch", "--list", args.branch):
        return adopted_before(repo, base_branch, args.branch)
    owners = gate_owners(repo, args.owners)
    with tempfile.TemporaryDirectory(prefix="oracle-adopt-") as name:
        tmp = Path(name)
        # The project as committed, in a copy: builds and collection write nothing into it.
        source = export(repo, tmp / "source")
        project = read_project(source, tmp)
        extra, needed = test_dependencies(source)
        project = dataclasses.replace(
            project, test_extra=extra, test_dependencies=needed, as_of=args.as_of or ""
        )
        answers = {
            "project_name": project.name,
            "project_slug": re.sub(r"[^a-z0-9]+", "-", project.name.lower()).strip("-"),
            "package_name": project.package,
            "cli_command": pick_command(project, args.command),
            "owners": owners,
            "base_branch": base_branch,
            "oracle_ref": args.oracle_ref,
            "include_example": "no",
            "ci": args.ci or ("github" if (repo / ".github").exists() else "none"),
        }
        # A fresh bake's next steps (`cd` into it, a first case) are not an adoption's.
        bake_dir = bake(tmp / "bake", **answers, _next_steps="no")
        gate_noxfile = noxfile_name(repo, bake_dir)
        project, collected = with_test_dependencies(project, source, bake_dir, args.wheelhouse, tmp)
        tests = args.tests or tests_entries(source, collected.files, project.packages)
        if not tests:
            raise AdoptError(f"{repo}: pytest collects no tests; pass --tests with their folders")
        touched = test_to_touch(collected.files, tests)
        mutated = strength_paths(source, project.package)
        render(bake_dir, tests, gate_noxfile, mutated)
        if project.test_extra:
            judge_yaml = bake_dir / "oracle/judge.yaml"
            value = json.dumps(project.test_extra)
            replace_once(judge_yaml, 'test_extra: ""', f"test_extra: {value}")
        facts = Facts(project, source, answers, args.branch, gate_noxfile, tests, mutated)
        write_manual(bake_dir, facts.manual(owners_file(repo, Path("CODEOWNERS")), args.check))
        changed = add_files(bake_dir, repo)
        if not changed:
            return (
                "the gate's files are all there: nothing to add (nothing changed); judge a "
                f"patch with `{sessions(gate_noxfile)} -s judge -- --head BRANCH`"
            )
        if not (repo / "fixtures.lock").exists():
            lock = [sys.executable, "scripts/fixtures_lock.py", "--write"]
            run([*lock, "--report", str(tmp / "lock.json")], repo, "writing fixtures.lock")
            changed.append("fixtures.lock")
    commit(repo, args.branch, changed)
    load_hook("post_gen_project").make_oracle_ref(repo, args.oracle_ref)
    nox = sessions(gate_noxfile)
    command = str(answers["cli_command"])
    case = first_case(repo, args.wheelhouse, command, project.package) if args.check else ""
    patches = check_patches(touched) if args.check else []
    failed = checked(repo, args.branch, args.wheelhouse, patches)
    done = (
        f"adopted: {len(changed)} files on branch {args.branch} (command "
        f"{answers['cli_command']!r}, tests {tests}, oracle ref {args.oracle_ref}{case})"
    )
    if failed:
        patch, lines = failed
        again = (
            f"then judge a branch that touches {touched} with `{nox} -s judge -- --head BRANCH`"
            if patch != NO_OP
            else f"then rerun `{nox} -s judge`"
        )
        raise AdoptError(
            f"{done}, but {patch} does not merge there yet; change this on the branch, {again}: "
            + "; ".join(lines)
        )
    verified = ""
    if args.check:
        verified = "; a no-op patch merges on it" + (
            f", and so does a patch that touches {touched}"
            if touched
            else f" (no collected test file under {tests} for a patch that touches one)"
        )
    return (
        f"{done}{verified}; left to do: review and merge {args.branch} into {base_branch}, "
        f"push it and {args.oracle_ref}, protect {args.oracle_ref} and require code owner "
        f"review (see oracle/README.md); more cases: `{nox} -s case -- -- ARG ...`"
    )


def sessions(gate_noxfile: str) -> str:
    """How the gate's sessions are started: `nox`, or `nox -f noxfile_oracle.py` beside the
    project's own noxfile."""
    return "nox" if gate_noxfile == "noxfile.py" else f"nox -f {gate_noxfile}"


def adopted_before(repo: Path, current: str, branch: str) -> str:
    """What a rerun says where adopt's branch exists already: on it, merge it; merged into the
    branch checked out (or its files there, a squash merge), nothing is left to do."""
    nox = sessions(GATE_NOXFILE if (repo / GATE_NOXFILE).is_file() else "noxfile.py")
    if current == branch:
        return (
            f"on {branch}, adopt's branch, already: review and merge it into the branch patches "
            "merge into, then judge patches from there (nothing changed)"
        )
    ancestor = ["git", "merge-base", "--is-ancestor", branch, "HEAD"]
    merged = subprocess.run(ancestor, cwd=repo, capture_output=True, check=False).returncode == 0
    if merged or (repo / "oracle/judge.yaml").is_file():
        return (
            f"{branch} is merged into {current} already: nothing to do (nothing changed); "
            f"judge a patch with `{nox} -s judge -- --head BRANCH`, add cases with "
            f"`{nox} -s case -- -- ARG ...`; `git branch -d {branch}` deletes the branch"
        )
    return f"branch {branch} exists already: review and merge it into {current} (nothing changed)"


def test_to_touch(files: Sequence[str], tests: Sequence[str]) -> str | None:
    """The collected test file the check's second patch touches: the first Python file of
    those pytest collected that is under `tests`."""
    inside_tests = [
        file
        for file in files
        if file.endswith(".py") and any(file == t or file.startswith(f"{t}/") for t in tests)
    ]
    return inside_tests[0] if inside_tests else None


@dataclass(frozen=True)
class Facts:
    """What adopt read of the project and chose for it: what the adopted manual says."""

    project: Project
    source: Path
    answers: Mapping[str, str]
    branch: str
    gate_noxfile: str
    tests: Sequence[str]
    mutated: Sequence[str]

    def code(self) -> tuple[str, str]:
        """Where the package is, in a sentence and as a path."""
        pkg, source = self.project.package, self.source
        if (source / "src" / pkg).is_dir():
            return f"the package `{pkg}` in `src/{pkg}/` (a src layout)", f"`src/{pkg}/`"
        if (source / pkg).is_dir():
            return f"the package `{pkg}` in `{pkg}/` at the root (a flat layout)", f"`{pkg}/`"
        if (source / f"{pkg}.py").is_file():
            return f"the module `{pkg}.py` at the root (a flat layout)", f"`{pkg}.py`"
        return f"the package `{pkg}`, from where the project's build takes it", f"`{pkg}`"

    def command(self) -> str:
        command = self.answers["cli_command"]
        target = dict(self.project.targets).get(command)
        if target is None:
            return f"`{command}`, given to adopt with `--command`: every case runs it."
        path = module_file(self.source, target.split(":")[0].strip())
        where = f", in `{path}`" if path else ""
        return f"`{command}`, the console script `{command} = {target}`{where}: every case runs it."

    def manual(self, codeowners: Path, checked: bool) -> dict[str, str]:
        """The adopted README's values (tools/adopted_readme.md.jinja)."""
        project, answers, nox = self.project, self.answers, sessions(self.gate_noxfile)
        code_text, code_short = self.code()
        listed = ", ".join(f"`{path}`" for path in self.tests)
        extra = project.test_extra
        backend = ", ".join(f"`{row}`" for row in project.backend)
        if nox == "nox":
            sessions_text = "`noxfile.py`, the gate's: `nox -s NAME` starts a session."
        else:
            sessions_text = (
                f"`{self.gate_noxfile}`, beside the project's own `noxfile.py`: here every "
                f"session is `{nox} -s NAME`, where the pages under `oracle/docs/` write "
                "`nox -s NAME`."
            )
        base = answers["base_branch"]
        if answers["ci"] == "github":
            ci = (
                f"`.github/workflows/oracle.yml` judges each pull request from a checkout of "
                f"`{base}`; [the hosting settings](docs/protect-the-oracle-ref.md) keep a patch "
                "from editing that workflow away."
            )
        else:
            ci = (
                "no workflow (adopt adds one with `--ci github`): in CI, judge from a checkout "
                f"of `{base}` too, never from the patch's own CI configuration."
            )
        if checked:
            cases = (
                f"Adopt's check added the first case, `{answers['cli_command']} --help`, where "
                "it exits 0 (`oracle/cases.yaml`)."
            )
        else:
            cases = (
                "The base has no case yet, and the judge fails closed until it has one: "
                f"`{nox} -s case -- --id help -- --help` adds `{answers['cli_command']} --help`."
            )
        return {
            "name": answers["project_name"],
            "nox": nox,
            "noxfile": self.gate_noxfile,
            "branch": self.branch,
            "base_branch": base,
            "oracle_ref": answers["oracle_ref"],
            "command": answers["cli_command"],
            "command_text": self.command(),
            "code_text": code_text,
            "code_short": code_short,
            "strength_text": ", ".join(f"`{path}`" for path in self.mutated),
            "tests_text": listed,
            "tests_short": listed,
            "extra_text": (
                f"`{extra}` ({len(project.test_dependencies)} requirements), pinned with hashes "
                "in `scripts/requirements-judge.txt` with the rest."
                if extra
                else "none beyond pytest and hypothesis, which the judge always installs."
            ),
            "backend_text": backend
            + (
                " (PEP 517's fallback: the project has no `[build-system]` table)"
                if project.backend == LEGACY_BACKEND
                else " (`[build-system] requires` of `pyproject.toml`)"
            ),
            "sessions_text": sessions_text,
            "owners_text": (
                f"{answers['owners']}, in `{codeowners.as_posix()}`: they own the gate's files "
                f"(`oracle/`, `scripts/`, `{self.gate_noxfile}`, ...), so a patch that touches "
                "them waits for their review."
            ),
            "ci_text": ci,
            "cases_text": cases,
        }


def module_file(source: Path, module: str) -> str:
    """The file of a module of the project, where a src or flat layout puts it ("" elsewhere)."""
    parts = module.split(".")
    for root in (source / "src", source):
        base = root.joinpath(*parts)
        for path in (base.with_name(f"{parts[-1]}.py"), base / "__init__.py"):
            if path.is_file():
                return path.relative_to(source).as_posix()
    return ""


def write_manual(bake_dir: Path, values: Mapping[str, str]) -> None:
    """The gate's manual as this project's: a README of its layout, paths and commands in
    place of the bake's (whose steps bake a new project), the pages' links back to a heading
    the README has, and the bake's files pointing at the pages where adopt puts them
    (oracle/docs/)."""
    bake_readme = (bake_dir / "README.md").read_text("utf-8")
    pages = sorted((bake_dir / "docs").glob("*.md"))
    rest = bake_readme.partition("\n## Everything else\n")[2]
    listed = rest.strip() or "\n".join(f"- [{p.stem}](docs/{p.name})" for p in pages)
    env = jinja2.Environment(keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    readme = env.from_string(README.read_text("utf-8")).render(
        **values, everything_else=f"## Everything else\n\n{listed}"
    )
    (bake_dir / "README.md").write_text(readme, "utf-8")
    headings = {slug(line) for line in readme.splitlines() if line.startswith("#")}
    for page in pages:
        text = page.read_text("utf-8")
        linked = re.sub(
            r"\[([^\]]*)\]\(\.\./README\.md#([^)\s]+)\)",
            lambda m: back_link(m.group(1), m.group(2), headings),
            text,
        )
        if linked != text:
            page.write_text(linked, "utf-8")
    pointed = re.compile(
        rf"(?<![\w./-])(?<!\]\()docs/({'|'.join(re.escape(p.name) for p in pages)})(?!\w)"
    )
    for rel in [*bake_files(bake_dir), *(p.relative_to(bake_dir) for p in pages)]:
        path = bake_dir / rel
        if rel.parts[0] == "scripts" or not pages:  # the gate's code stays as the bake has it
            continue
        try:
            text = path.read_text("utf-8")
        except UnicodeDecodeError:
            continue
        moved = pointed.sub(rf"{MANUAL}/docs/\1", text)
        if moved != text:
            path.write_text(moved, "utf-8")


def back_link(text: str, anchor: str, headings: Collection[str]) -> str:
    """A page's link to a heading of the README, to one the adopted README has: the bake's
    six steps are its first change; another missing heading, the README itself."""
    if anchor in headings:
        return f"[{text}](../README.md#{anchor})"
    if anchor.startswith("from-a-bake-to-a-first-merge"):
        return f"[{text.replace('six steps', 'first-change steps')}](../README.md#{FIRST_CHANGE})"
    return f"[{text}](../README.md)"


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.lstrip("#").strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


# A command that is Python itself (`--command python`: a library's cases are Python command
# lines): its own `--help` names the interpreter's path, which differs between environments.
INTERPRETER = re.compile(r"python(\d+(\.\d+)*)?")


def first_case(repo: Path, wheelhouse: Path, command: str, package: str) -> str:
    """A first case, committed on the branch: the cassettes have something to compare from
    the first judgment on (nothing, where it does not exit 0). The CLI's `--help`, whose stdout
    add_case.py compares as `stdout.additive` (an option a patch adds does not block on it);
    for Python itself, `-c "import PACKAGE"`: the library imports without a word."""
    python = INTERPRETER.fullmatch(command) is not None
    argv, name = (["-c", f"import {package}"], "import") if python else (["--help"], "help")
    cmd = [sys.executable, "scripts/add_case.py", "--wheelhouse", str(wheelhouse), "--id", name]
    env = {**os.environ, **OFFLINE, "ORACLE_WHEELHOUSE": str(wheelhouse)}
    done = subprocess.run([*cmd, "--", *argv], cwd=repo, env=env, capture_output=True)
    shown = " ".join(argv) if python else "--help"
    if done.returncode != 0:
        return f", no case: `{command} {shown}` did not run cleanly"
    git(repo, "commit", "--quiet", "--no-verify", "-m", f"A {name} case", "oracle/cases.yaml")
    return f", a `{shown}` case" if python else ", a --help case"


def check_patches(touched: str | None) -> list[tuple[str, str | None]]:
    """The patches adopt's check judges: a no-op one, then one that appends a comment line to
    a collected test file, so that the steps that run only where a patch changes tests run
    too (the assert inventory's run of them, the advisory tests)."""
    patches: list[tuple[str, str | None]] = [(NO_OP, None)]
    if touched:
        patches.append((f"a patch that touches {touched}", touched))
    return patches


def checked(
    repo: Path, branch: str, wheelhouse: Path, patches: Sequence[tuple[str, str | None]]
) -> tuple[str, list[str]] | None:
    """The adopted gate judging each patch on its branch, in a clone, skipping no step's run
    (`--fresh`: a no-op patch builds as its parent, and a crossrun that reused nothing for it
    would not show whether the project's tests run here). The first that does not merge, with
    each step that did not pass and its one line; None: each merges."""
    if not patches:
        return None
    with tempfile.TemporaryDirectory(prefix="oracle-adopt-check-") as name:
        clone = Path(name) / "repo"
        git(repo.parent, "clone", "--quiet", "--shared", "--branch", branch, str(repo), str(clone))
        for what, touched in patches:
            git(clone, "checkout", "--quiet", "-B", "adopt-check", f"origin/{branch}")
            if touched is None:
                git(clone, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "no-op")
            else:
                path = clone / touched
                data = path.read_bytes()
                path.write_bytes(
                    data + (b"" if data.endswith(b"\n") or not data else b"\n") + TOUCH
                )
                git(clone, "commit", "--quiet", "--no-verify", "-m", f"touch {touched}", touched)
            args = ("--base", f"origin/{branch}", "--head", "HEAD", "--fresh")
            env = {"ORACLE_WHEELHOUSE": str(wheelhouse)}
            failed = not_merged(judge_script(clone, *args, env=env).report)
            if failed:
                return what, failed
    return None


def not_merged(report: Mapping[str, Any]) -> list[str]:
    """Each step of a judgment that did not pass, with its one line (empty: it merges)."""
    if not report:
        return ["judge: it left no report"]
    return [
        f"{step['name']}: {step['summary']}"
        for step in report["steps"]
        if step["status"] not in ("pass", "advisory")
    ] or ([] if report["verdict"] == "merge" else [f"judge: {report['verdict']}"])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", type=Path, help="the repository to adopt the gate in")
    p.add_argument(
        "--owners", help="the gate's code owners (default: those of the project's CODEOWNERS)"
    )
    p.add_argument("--command", help="console script the cases run (default: the project's)")
    p.add_argument("--tests", nargs="+", help="test folders or files (default: pytest's)")
    p.add_argument("--branch", default=BRANCH, help=f"branch to commit on (default {BRANCH})")
    p.add_argument("--oracle-ref", default="oracle/main", help="protected ref of flake state")
    p.add_argument("--ci", choices=("github", "none"), help="default: github if .github exists")
    p.add_argument("--wheelhouse", type=Path, default=Path(".oracle/wheelhouse"))
    p.add_argument(
        "--as-of",
        type=moment,
        metavar="TIME",
        help="resolve the project's own and its tests' requirements as they were at TIME "
        "(RFC 3339, e.g. the adopted commit's date for its past history; default: today); "
        "the gate's own tools and the build backend stay today's",
    )
    p.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="commit without adding a --help case and judging a no-op patch and one that "
        "touches a test file",
    )
    return p


def moment(text: str) -> str:
    """An RFC 3339 time with its zone, for --as-of (uv reads it)."""
    try:
        parsed: datetime | None = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or "T" not in text:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected an RFC 3339 time with its zone, such as 2022-10-04T12:00:00Z"
        )
    return text


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.wheelhouse.is_absolute():
        args.wheelhouse = args.path.resolve() / args.wheelhouse
    try:
        print(f"adopt: {adopt(args)}")
    except (AdoptError, FailClosed, CookiecutterException) as exc:
        print(f"adopt: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
