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
since pytest's default `python_files` skips them): the folders and root files it collects from
are judge.yaml's `tests:`. Bakes the template without its example using these answers and adds
the gate's files that are missing; a file that exists is never overwritten (CODEOWNERS and
.gitignore get only their missing lines; an existing noxfile.py is kept and the gate's sessions
go to noxfile_oracle.py). Writes fixtures.lock, creates the oracle ref and commits everything on
`--branch`. Rerunning finds nothing to add and changes nothing.

Exit codes: 0 adopted, or nothing left to add; 2 cannot adopt (one line says why: not a clean
git repository, no console script, a build or a collection that fails).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from cookiecutter.exceptions import CookiecutterException

from tools.bakery import OFFLINE, TEMPLATE, bake, judge_script, load_hook

SCRIPTS = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"
sys.path.insert(0, str(SCRIPTS))
from _gate import test_deps  # noqa: E402
from _gate.envs import build_env, error_line  # noqa: E402
from _gate.protocol import FailClosed  # noqa: E402
from preconditions import PLACEHOLDER_OWNER as PLACEHOLDER  # noqa: E402

BRANCH = "oracle-gate"
GATE_NOXFILE = "noxfile_oracle.py"
JUDGE_TOOLS = ("pyyaml", "pytest", "hypothesis", "uv")  # what the judge's envs always hold
LEGACY_BACKEND = ("setuptools>=40.8.0",)  # PEP 517's fallback for a project without one
# What the bake brings that an existing project already has, or that is the example's own;
# the gate's manual (README.md and its docs/ pages) goes under oracle/ instead (add_manual).
NOT_ADOPTED = ("src", "tests", "pyproject.toml", "README.md", "docs", "Makefile", "fixtures.lock")
MANUAL = "oracle"
CACHES = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
MERGED = ("CODEOWNERS", ".gitignore")  # missing lines appended, never rewritten
ROOT_TESTS = ("test*.py", "*_test.py", "tests.py")


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
    packages = sorted({n.split("/")[0] for n in names if "/" in n and ".dist-info" not in n})
    return Project(
        name=metadata["Name"],
        package=(packages or [metadata["Name"].replace("-", "_")])[0],
        commands=console_scripts(entry_points),
        dependencies=tuple(
            r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r
        ),
        backend=build_requires(repo),
    )


def console_scripts(entry_points: str) -> tuple[str, ...]:
    section, found = "", []
    for line in entry_points.splitlines():
        if line.startswith("["):
            section = line.strip("[] ")
        elif section == "console_scripts" and "=" in line:
            found.append(line.split("=", 1)[0].strip())
    return tuple(found)


def build_requires(repo: Path) -> tuple[str, ...]:
    pyproject = repo / "pyproject.toml"
    if not pyproject.exists():
        return LEGACY_BACKEND
    # tomllib is 3.11+; the adopt session installs tomli on 3.10.
    toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    data = toml.loads(pyproject.read_text("utf-8"))
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
    test_extra): scripts/_gate/test_deps.py, the reader the judge uses too."""
    where, rows = test_deps.declared(source)
    return where, tuple(rows)


def compile_requirements(project: Project, dest: Path, tmp: Path) -> None:
    """Hash-pinned: the judge installs only these, from the wheelhouse."""
    wanted = tmp / "judge.in"
    rows = [*JUDGE_TOOLS, *project.backend, *project.dependencies, *project.test_dependencies]
    wanted.write_text("\n".join(rows) + "\n")
    cmd = ["uv", "pip", "compile", "--universal", "--generate-hashes", "--python-version"]
    cmd += ["3.10", "--no-header", "--quiet", str(wanted), "-o", str(dest)]
    run(cmd, tmp, "compiling scripts/requirements-judge.txt")
    note = (
        "# Hash-pinned tools, build backend and runtime dependencies of the judge's environments,\n"
        f"# installed only from the local wheelhouse. Compiled by oracle-template's adopt from:\n"
        f"#   {' '.join(rows)}\n"
    )
    dest.write_text(note + dest.read_text())


def fill_wheelhouse(bake_dir: Path, wheelhouse: Path, tmp: Path) -> None:
    cmd = [sys.executable, str(bake_dir / "scripts/wheelhouse.py"), "--dest", str(wheelhouse)]
    cmd += ["--requirements", str(bake_dir / "scripts/requirements-judge.txt")]
    run([*cmd, "--report", str(tmp / "wheelhouse.json")], bake_dir, "filling the wheelhouse")


def collected_tests(
    repo: Path, bake_dir: Path, wheelhouse: Path, tmp: Path
) -> tuple[list[str], bool]:
    """Folders and root files pytest collects tests from, on a build made as the judge makes
    it: the layout as pytest sees it, not as a naming convention guesses it; and whether a
    module failed to import for a module that is not installed."""
    python = build_env(repo, tmp, wheelhouse, bake_dir / "scripts/requirements-judge.txt")
    roots = sorted({p.name for pattern in ROOT_TESTS for p in repo.glob(pattern) if p.is_file()})
    found: set[str] = set()
    missing = False
    for targets in ([], roots) if roots else ([],):
        cmd = [str(python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run(
            [*cmd, *targets], cwd=repo, env=env, capture_output=True, text=True, check=False
        )
        found.update(line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line)
        missing = missing or "No module named" in proc.stdout + proc.stderr
    return sorted({path.split("/")[0] for path in found}), missing


def with_test_dependencies(
    project: Project, source: Path, bake_dir: Path, wheelhouse: Path, tmp: Path
) -> tuple[Project, list[str]]:
    """The project with the test dependencies the judge will pin and install (compiled into
    the bake's requirements-judge.txt, the wheelhouse filled), and the folders pytest collects
    its tests from. A catch-all `dev` list (as often lint and docs tools as the tests') is
    kept only where the tests do not collect without it."""
    if project.test_extra in test_deps.CATCH_ALL:
        bare = dataclasses.replace(project, test_extra="", test_dependencies=())
        layout, missing = pinned(bare, source, bake_dir, wheelhouse, tmp / "env-bare")
        if not missing:
            return bare, layout
    return project, pinned(project, source, bake_dir, wheelhouse, tmp / "env")[0]


def pinned(
    project: Project, source: Path, bake_dir: Path, wheelhouse: Path, env: Path
) -> tuple[list[str], bool]:
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
    """On a new branch, for review: the base branch itself is left as it was."""
    git(repo, "checkout", "--quiet", "-b", branch)
    git(repo, "add", "--", *paths)
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
    owners = gate_owners(repo, args.owners)
    if git(repo, "branch", "--list", args.branch):
        return f"branch {args.branch} exists already: review and merge it (nothing changed)"
    with tempfile.TemporaryDirectory(prefix="oracle-adopt-") as name:
        tmp = Path(name)
        # The project as committed, in a copy: builds and collection write nothing into it.
        source = export(repo, tmp / "source")
        project = read_project(source, tmp)
        extra, needed = test_dependencies(source)
        project = dataclasses.replace(project, test_extra=extra, test_dependencies=needed)
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
        bake_dir = bake(tmp / "bake", **answers)
        gate_noxfile = noxfile_name(repo, bake_dir)
        project, layout = with_test_dependencies(project, source, bake_dir, args.wheelhouse, tmp)
        tests = args.tests or layout
        if not tests:
            raise AdoptError(f"{repo}: pytest collects no tests; pass --tests with their folders")
        render(bake_dir, tests, gate_noxfile, strength_paths(source, project.package))
        if project.test_extra:
            judge_yaml = bake_dir / "oracle/judge.yaml"
            value = json.dumps(project.test_extra)
            replace_once(judge_yaml, 'test_extra: ""', f"test_extra: {value}")
        changed = add_files(bake_dir, repo)
        if not changed:
            return "the gate's files are all there: nothing to add (nothing changed)"
        if not (repo / "fixtures.lock").exists():
            lock = [sys.executable, "scripts/fixtures_lock.py", "--write"]
            run([*lock, "--report", str(tmp / "lock.json")], repo, "writing fixtures.lock")
            changed.append("fixtures.lock")
    commit(repo, args.branch, changed)
    load_hook("post_gen_project").make_oracle_ref(repo, args.oracle_ref)
    sessions = "nox" if gate_noxfile == "noxfile.py" else f"nox -f {gate_noxfile}"
    case = first_case(repo, args.wheelhouse) if args.check else ""
    failed = checked(repo, args.branch, args.wheelhouse) if args.check else []
    done = (
        f"adopted: {len(changed)} files on branch {args.branch} (command "
        f"{answers['cli_command']!r}, tests {tests}, oracle ref {args.oracle_ref}{case})"
    )
    if failed:
        raise AdoptError(
            f"{done}, but a no-op patch does not merge there yet; change this on the branch, "
            f"then rerun `{sessions} -s judge`: " + "; ".join(failed)
        )
    verified = "; a no-op patch merges on it" if args.check else ""
    return (
        f"{done}{verified}; left to do: review and merge {args.branch} into {base_branch}, "
        f"push it and {args.oracle_ref}, protect {args.oracle_ref} and require code owner "
        f"review (see oracle/README.md); more cases: `{sessions} -s case -- -- ARG ...`"
    )


def first_case(repo: Path, wheelhouse: Path) -> str:
    """A `--help` case, committed on the branch: the cassettes have something to compare from
    the first judgment on (nothing, where `--help` does not exit 0). add_case.py compares a
    help's stdout as `stdout.additive`: an option a patch adds does not block on it."""
    cmd = [sys.executable, "scripts/add_case.py", "--wheelhouse", str(wheelhouse), "--id", "help"]
    env = {**os.environ, **OFFLINE, "ORACLE_WHEELHOUSE": str(wheelhouse)}
    done = subprocess.run([*cmd, "--", "--help"], cwd=repo, env=env, capture_output=True)
    if done.returncode != 0:
        return ", no case: `--help` did not run cleanly"
    git(repo, "commit", "--quiet", "--no-verify", "-m", "A --help case", "oracle/cases.yaml")
    return ", a --help case"


def checked(repo: Path, branch: str, wheelhouse: Path) -> list[str]:
    """The adopted gate judging a no-op patch on its branch, in a clone, skipping no step's
    run (`--fresh`: a no-op patch builds as its parent, and a crossrun that reused nothing for
    it would not show whether the project's tests run here): each step that did not pass,
    with its one line (empty: it merges)."""
    with tempfile.TemporaryDirectory(prefix="oracle-adopt-check-") as name:
        clone = Path(name) / "repo"
        git(repo.parent, "clone", "--quiet", "--shared", "--branch", branch, str(repo), str(clone))
        git(clone, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "no-op")
        args = ("--base", f"origin/{branch}", "--head", "HEAD", "--fresh")
        report = judge_script(clone, *args, env={"ORACLE_WHEELHOUSE": str(wheelhouse)}).report
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
        "--no-check",
        dest="check",
        action="store_false",
        help="commit without adding a --help case and judging a no-op patch",
    )
    return p


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
