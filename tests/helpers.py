"""Helpers shared by the template's tests: plain functions, constants and types; every fixture
is conftest.py's. No test module imports another; each imports what it shares from here.

The gate's scripts (`{{cookiecutter.project_slug}}/scripts`) and the repository root are on
`sys.path` through pytest's `pythonpath` setting (the root pyproject.toml).
"""

from __future__ import annotations

import ast
import io
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import count_asserts
import crossrun
import fixtures_lock
import flake_budget
import write_set
from _gate.core.config import load_config
from _gate.core.context import Judgment, write_judgment
from _gate.core.protocol import Report
from _gate.core.steps import report_file as report_name
from _gate.judge.lanes import Judge
from _gate.judge.runner import Ran, finished
from _gate.plugin.confine import LEVEL_VARIABLE
from _gate.runs.bytecode import write_bytecode
from _gate.runs.envs import bin_dir, build_env
from _gate.verdict.verdict import verdict as worst

from tools import adopted_history
from tools.bakery import TEMPLATE, Verdict, bake, branch, edit, git
from tools.slices import Slice

SCRIPTS = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"
# Build backends beside flit_core, for the builds of tests/test_provenance.py.
BACKENDS = TEMPLATE / "tests" / "data" / "requirements-backends.txt"
# The variables of a job a test hands the launcher itself (run_confined takes no default:
# the gate builds each job's from _gate/plugin/patch_env.py).
JOB_ENV = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C.UTF-8"}
# The attacks' break (test_confinement_attacks.py, test_hermetic.py): a preimage one cent too
# large for every discounted total above 10 euros, which only this property oracle sees.
RULE = "src/shop/discounts.py"
HONEST_RETURN = "    return amount\n"
BROKEN_RETURN = "    return amount + 1 if discounted_cents > 1000 else amount\n"
CAUGHT_BY = "test_invert_finds_the_smallest_preimage_of_any_value"
# The baked oracle/judge.yaml's perturbed runs (the suite's `shop` runs none: conftest.py).
PERTURBATIONS = "perturb: [env, clock, terminal, files]\n"
Built = Callable[[str, str], dict[str, Path]]  # (ref, side) -> {"tree": ..., "python": ...}
Step = dict[str, Any]  # one step as the judge records it, and the exit code of its script
Main = Callable[[list[str]], int]  # a step script's main(argv)


# --- processes and builds ---------------------------------------------------------------------


def alive(pid: int, grace: float = 5.0) -> bool:
    """Whether the process still runs `grace` seconds on: SIGKILL to a group is delivered at
    once but acted on when each process is next scheduled, later on a loaded machine."""
    deadline = time.monotonic() + grace
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split()[2] == "Z":
            return False
        if time.monotonic() > deadline:
            return True
        time.sleep(0.05)


def running(text: str, grace: float = 5.0) -> list[Path]:
    """The processes whose command line holds `text`, once a killed group or namespace had
    `grace` seconds to go (the kernel acts on SIGKILL when each process is next scheduled)."""

    def cmdline(proc: Path) -> str:
        try:
            return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            return ""

    deadline = time.monotonic() + grace
    while True:
        found = [p for p in Path("/proc").glob("[0-9]*") if text in cmdline(p)]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def compiled(python: Path) -> Path:
    """`python`'s environment with its bytecode written as the judge writes it once a build
    is done (_gate/runs/bytecode.py), for a fixture whose environment runs many pytest processes:
    bytecode changes nothing a run finds, only what each start costs."""
    write_bytecode(python.parent.parent)
    return python


def builder(repo: Path, root: Path, wheelhouse: Path) -> Built:
    """Worktree and build of a commit, as the judge makes them, each built once: a step's
    script then runs on them (`main(argv)`) without a whole judge. `side` names the
    environment's folder (parent or patch), which some tests read back."""
    done: dict[tuple[str, str], dict[str, Path]] = {}

    def built(ref: str, side: str) -> dict[str, Path]:
        sha = git(repo, "rev-parse", ref).strip()
        if (sha, side) not in done:
            tree = root / sha[:12] / "tree"
            if not tree.exists():
                git(repo, "worktree", "add", "-q", "--detach", str(tree), sha)
            requirements = tree / "scripts/requirements-judge.txt"
            python = build_env(tree, root / sha[:12] / side, wheelhouse, requirements)
            # Bytecode as the judge writes it: the first build's compiled, the others' taken
            # from it where a module is the same file.
            first = next((d["python"].parent.parent for d in done.values()), None)
            write_bytecode(python.parent.parent, first)
            done[sha, side] = {"tree": tree, "python": python}
        return done[sha, side]

    return built


# --- confinement off: where an attack's effect must be seen -------------------------------

UNCONFINED = {LEVEL_VARIABLE: "none"}  # the judge's environment: the launcher capped at none


def best_effort_base(repo: Path) -> str:
    """A base of `main` whose judge.yaml says `sandbox: best-effort` (made once per bake):
    judged with UNCONFINED, the patch's code runs with the judge's authority, as on a machine
    that cannot confine it, so a test sees what an attack would do there."""
    name = "sandbox-best-effort"
    if git(repo, "branch", "--list", name):
        return name

    def loosen(tree: Path) -> None:
        edit(tree / "oracle/judge.yaml", "sandbox: required", "sandbox: best-effort")

    return branch(repo, name, loosen)


# --- steps as the judge runs and records them ------------------------------------------------


def report_file(reports: Path, name: str) -> Path:
    """Where the judge reads the report of step `name` (replay's is replay-report.json)."""
    return reports / report_name(name)


def as_judged(reports: Path, name: str, code: int, stdout: bytes = b"") -> Step:
    """Step `name` as the judge records it from its report in `reports`: status, summary, the
    evidence the judge report keeps; the `::error` lines of the step's `stdout` are forwarded
    to the judge's output. `exit_code` is the script's own."""
    step = finish(Judge(repo=reports, reports=reports), name, Ran(code, stdout, [], 0.0))
    return {**step, "exit_code": code}


def verdict_of(steps: Sequence[Step]) -> tuple[int, str]:
    """The judge's exit code and verdict over these rows of judge-report.json, each read as
    the step's report (as the judge holds it)."""
    return worst([Report.from_payload(step, step["name"]) for step in steps])


def decided(steps: Sequence[Step]) -> str:
    """The judge's verdict over these steps: merge, block, needs-review or error."""
    return verdict_of(steps)[1]


def sha(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


def worktree(repo: Path, ref: str, dest: Path) -> Path:
    git(repo, "worktree", "add", "-q", "--detach", str(dest), sha(repo, ref))
    return dest


def reported(main: Main, report: Path, *argv: str | Path) -> tuple[int, dict[str, Any]]:
    """A step script's `main(argv)` with `--report`: its exit code and its JSON report."""
    code = main([*map(str, argv), "--report", str(report)])
    return code, json.loads(report.read_text("utf-8"))


def built_cli(built: dict[str, Path], tree: Path) -> Path:
    """The build's console script, named by the base's judge.yaml."""
    command = load_config(tree / "oracle/judge.yaml").command
    return bin_dir(built["python"].parent.parent) / command


def case_flags(tree: Path) -> tuple[str | Path, ...]:
    """The case arguments the judge passes record and replay: all from the base tree."""
    timeout = load_config(tree / "oracle/judge.yaml").case_timeout
    cases = ("--cases", tree / "oracle/cases.yaml", "--fixtures", tree / "fixtures")
    return (*cases, "--timeout", str(timeout))


def run_step(reports: Path, name: str, main: Main, *argv: str | Path) -> Step:
    """Step `name` run through its script's `main(argv)`, its report where the judge reads it;
    returns the step as the judge records it."""
    code = main([*map(str, argv), "--report", str(report_file(reports, name))])
    return as_judged(reports, name, code)


def judged_step(
    j: Judgment,
    name: str,
    main: Main,
    earlier: Mapping[str, Report] | None = None,
) -> Step:
    """Step `name` given the judgment as the judge gives it to a step's process (`--judgment
    FILE`, with the earlier outcomes it reads), its report where the judge reads it."""
    given = j.reports / f"{name}.judgment.json"
    write_judgment(given, j, earlier or {})
    code = main(["--judgment", str(given), "--report", str(report_file(j.reports, name))])
    return as_judged(j.reports, name, code)


def run_crossrun(
    envs: Built,
    head: str,
    tmp: Path,
    *extra: str,
    base: str = "main",
    name: str = "crossrun.json",
    patch_tree: bool = False,
) -> tuple[int, dict[str, Any]]:
    """The crossrun by hand on the builds of `base` and `head`, the base tree's `tests`, no
    perturbed run (test_perturb.py runs those) and, with `patch_tree`, the head's tree for the
    tests coupled to moved internals; `extra` flags win. Its exit code and its report."""
    parent, patch = envs(base, "parent"), envs(head, "patch")
    report = tmp / name
    argv = ["--tree", str(parent["tree"]), "--tests", "tests", "--report", str(report)]
    argv += ["--parent-python", str(parent["python"]), "--patch-python", str(patch["python"])]
    argv += ["--patch-tree", str(patch["tree"])] if patch_tree else []
    code = crossrun.main([*argv, "--perturb", "", *extra])
    return code, json.loads(report.read_text("utf-8"))


def crossrun_then_budget(
    envs: Built, head: str, tmp_path: Path, base: str = "main", between: Change | None = None
) -> tuple[int, dict[str, Any]]:
    """The crossrun of `head` on `base` (deferred to flake control), then flake-budget as the
    judge runs it last (an oracle that passed, an empty oracle ref), `between` done to the base
    tree in between: its exit code and its report."""
    code, report = run_crossrun(envs, head, tmp_path, base=base)
    assert (code, report["status"]) == (1, "deferred"), report["summary"]
    oracle_report = tmp_path / "oracle.json"
    oracle_report.write_text(json.dumps({"status": "pass", "evidence": {}}), "utf-8")
    (tmp_path / "quarantine.yaml").write_text("quarantine: []\n", "utf-8")
    (tmp_path / "ledger.json").write_text("{}", "utf-8")
    parent, patch = envs(base, "parent"), envs(head, "patch")
    argv = [
        "--oracle-report",
        str(oracle_report),
        "--crossrun-report",
        str(tmp_path / "crossrun.json"),
    ]
    argv += ["--tree", str(parent["tree"]), "--oracle", str(parent["tree"] / "oracle")]
    argv += ["--oracle-python", str(parent["python"]), "--patch-python", str(patch["python"])]
    argv += ["--quarantine", str(tmp_path / "quarantine.yaml")]
    argv += ["--ledger", str(tmp_path / "ledger.json")]
    budget = tmp_path / "flake-budget.json"
    if between is not None:
        between(parent["tree"])
    code = flake_budget.main([*argv, "--report", str(budget)])
    return code, json.loads(budget.read_text("utf-8"))


def static_steps(repo: Path, head: str, tmp: Path, base: str = "main") -> dict[str, Step]:
    """write-set and fixtures-lock of `head` against `base`, with judge.py's arguments: the
    config and the lock are the base worktree's, the fixtures checked are the patch's."""
    parent, patch = worktree(repo, base, tmp / "parent"), worktree(repo, head, tmp / "patch")
    reports = tmp / "reports"
    refs = ("--repo", repo, "--base", sha(repo, base), "--head", sha(repo, head))
    config = ("--config", parent / "oracle/judge.yaml")
    lock = ("--lock", parent / "fixtures.lock", "--base-root", parent)
    return {
        "write-set": run_step(reports, "write-set", write_set.main, *refs, *config),
        "fixtures-lock": run_step(
            reports, "fixtures-lock", fixtures_lock.main, "--check", "--root", patch, *lock
        ),
    }


def inventory_step(repo: Path, envs: Built, head: str, tmp: Path, base: str = "main") -> Step:
    """assert-inventory of `head` against `base` with judge.py's arguments: both worktrees,
    git refs, the base's judge.yaml and allowlist, both builds collecting, a cache."""
    parent, patch = envs(base, "parent"), envs(head, "patch")
    trees = ("--parent", parent["tree"], "--patch", patch["tree"], "--repo", repo)
    refs = ("--base", sha(repo, base), "--head", sha(repo, head))
    config = ("--config", parent["tree"] / "oracle/judge.yaml")
    allowlist = ("--allowlist", parent["tree"] / "oracle/allowlist.yaml")
    builds = ("--parent-python", parent["python"], "--patch-python", patch["python"])
    cache = ("--cache", tmp / "inventory-cache.json")
    argv = (*trees, *refs, *config, *allowlist, *builds, *cache)
    return run_step(tmp / "reports", "assert-inventory", count_asserts.main, *argv)


# --- the assert inventory on real bakes (test_inventory*.py, test_crossrun.py) ---------------

D = "tests/test_discounts.py"
U = "tests/test_unittest_style.py"
C = "tests/test_classes.py"
# The example has pytest functions only; the base gains unittest and class-based tests.
UNITTEST_STYLE = """\
import unittest

from shop.discounts import apply_discount


class ApplyDiscountTest(unittest.TestCase):
    def test_ten_percent(self) -> None:
        self.assertEqual(apply_discount(1000, 1000), 900)

    def test_zero_rate(self) -> None:
        result = apply_discount(999, 0)
        self.assertEqual(result, 999)
"""
CLASS_STYLE = """\
from shop.discounts import apply_discount


class TestHalfOff:
    def test_even_amount(self) -> None:
        assert apply_discount(1000, 5000) == 500
"""
Change = Callable[[Path], object]


def edits(*changes: tuple[str, str, str]) -> Change:
    def change(repo: Path) -> None:
        for path, old, new in changes:
            edit(repo / path, old, new)

    return change


def bake_with(root: Path, files: dict[str, str], message: str) -> Path:
    """A bake whose base gains these files in one commit."""
    base = bake(root)
    for path, text in files.items():
        (base / path).write_text(text, "utf-8")
    git(base, "add", "--all")
    git(base, "commit", "-q", "-m", message)
    return base


def rule_ids(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(rule, test id) of each blocking finding."""
    return [(f["rule"], f["id"]) for f in report["evidence"]["findings"]]


def run_inventory(
    repo: Path,
    base: str,
    head: str,
    tmp: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    config: Path | None = None,
) -> tuple[int, dict[str, Any], str]:
    """The inventory step on base and head worktrees, as the judge runs it, from any base:
    `count_asserts.main(argv)` in this process (its collections are real processes).

    `config` defaults to the base tree's oracle/judge.yaml; the environment never carries the
    runner's own GITHUB_ACTIONS or PYTEST_ADDOPTS, which change what the step prints and finds.
    """
    tmp.mkdir(exist_ok=True)
    trees = {}
    for side, ref in (("parent", base), ("patch", head)):
        trees[side] = tmp / side
        git(repo, "worktree", "add", "-q", "--detach", str(trees[side]), ref)
    report = tmp / "assert-inventory.json"  # the name the judge gives it
    config = config or trees["parent"] / "oracle/judge.yaml"
    argv = ["--parent", str(trees["parent"]), "--patch", str(trees["patch"]), "--repo", str(repo)]
    argv += ["--base", base, "--head", head, "--config", str(config), "--report", str(report)]
    if "--cache" not in extra:
        # One cache per bake, as a repository keeps .oracle/inventory-cache.json: the base's
        # trees are analysed and collected once for all the patches judged against them.
        argv += ["--cache", str(repo.parent / f"{repo.name}.inventory-cache.json")]
    clean = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "PYTEST_ADDOPTS")}
    out = io.StringIO()
    try:
        with (
            environ({**clean, **(env or {})}),
            redirect_stdout(out),
            redirect_stderr(io.StringIO()),
        ):
            code = count_asserts.main([*argv, *extra])
    finally:
        for path in trees.values():
            git(repo, "worktree", "remove", "--force", str(path))
    return code, json.loads(report.read_text()), out.getvalue()


@contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """os.environ as `values` for one in-process step (each xdist worker is its own process)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def inventory(repo: Path, head: str, tmp: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """The inventory step of `head` against main."""
    code, report, _ = run_inventory(repo, "main", head, tmp, *extra)
    return code, report


def collected_by(python: Path) -> tuple[str, ...]:
    return ("--parent-python", str(python), "--patch-python", str(python))


def finish(judge: Judge, name: str, ran: Ran) -> Step:
    """The step `name` of a process that ended, as the judge records it in judge-report.json."""
    judge.append(finished(judge.reports / report_name(name), name, ran), ran.seconds)
    return judge.steps[-1]


def run_script(judge: Judge, name: str, script: str, *args: str | Path) -> int:
    """A step script of the judge's base run on its own flags, recorded as the judge records
    a step."""
    return judge.append(judge.process(name, script, *args), 0.0)


def breaks_the_rules(repo: Path) -> None:
    edit(repo / RULE, HONEST_RETURN, BROKEN_RETURN)


def pth(code: str) -> str:
    """A .pth file's one line that runs `code` at every start of that environment's python."""
    return f"import sys; exec({code!r}, {{}})\n"  # its own globals: site's are not its


def shown(verdict: Verdict) -> str:
    """The steps as the verdict line's reader sees them: what an assertion prints."""
    steps = verdict.report.get("steps") or []
    lines = [f"{s['name']}: {s['status']}: {s['summary'][:400]}" for s in steps]
    return "\n".join(lines) or verdict.output[-3000:]


# --- adopted projects (tools/adopt.py) ---------------------------------------------------------

# Who commits in an adopted project: its git runs as the user's would, with no -c options.
ADOPTER = {
    "GIT_AUTHOR_NAME": "adopter",
    "GIT_AUTHOR_EMAIL": "adopter@localhost",
    "GIT_COMMITTER_NAME": "adopter",
    "GIT_COMMITTER_EMAIL": "adopter@localhost",
}
# A one-module CLI, and the flit project that ships it as `tally`.
TALLY = '''"""Counts words."""

import sys


def main() -> int:
    print(len(sys.argv[1:]))
    return 0
'''


def flit_project(name: str, script: str | None) -> str:
    """pyproject.toml of a flit project `name` whose console script `name` runs `script` (no
    console script: a library)."""
    scripts = f'\n[project.scripts]\n{name} = "{script}"\n' if script else ""
    return f"""\
[build-system]
requires = ["flit_core>=3.9,<5"]
build-backend = "flit_core.buildapi"

[project]
name = "{name}"
version = "1.0"
description = "Counts words."
dependencies = []
{scripts}"""


PYPROJECT = flit_project("tally", "tally:main")
TALLY_TEST = "import tally\n\n\ndef test_it():\n    assert tally.main() == 0\n"


def written(root: Path, files: dict[str, str]) -> Path:
    """`files` (path -> text) written under `root`."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def committed(repo: Path, files: dict[str, str]) -> Path:
    """A new repository `repo` on `trunk` holding `files` in one commit."""
    written(repo, files)
    git(repo.parent, "init", "-q", "-b", "trunk", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def history_rows(
    source: Path, start: str, work: Path, wheelhouse: Path, cases: list[str], *options: str
) -> list[dict[str, Any]]:
    """`python -m tools.adopted_history` on a slice, as the README runs it: a row per judged
    commit (subject, verdict, why, seconds)."""
    argv = [str(source), "--start", start, "--work", str(work), "--wheelhouse", str(wheelhouse)]
    argv += ["--json", str(work / "rows.json"), *options]
    for case in cases:
        argv += ["--case", case]
    assert adopted_history.main(argv) == 0
    rows: list[dict[str, Any]] = json.loads((work / "rows.json").read_text())["rows"]
    return rows


def slice_rows(piece: Slice, work: Path, wheelhouse: Path, *options: str) -> list[dict[str, Any]]:
    """history_rows of a pinned slice (tools/slices.py), with its cases and branch."""
    cases, more = list(piece.cases), [*piece.options(), *piece.write_fixtures(work / "fixtures")]
    return history_rows(piece.bundle, piece.start, work, wheelhouse, cases, *more, *options)


# A small flit package the provenance and bytecode tests build (`tiny`).
TINY_PYPROJECT = """
[build-system]
requires = ["flit_core>=3.9,<5"]
build-backend = {backend}
{backend_path}

[project]
name = "tiny"
version = "0.1.0"
description = "a package the provenance check builds"
dependencies = ["PyYAML >= 6"]

[project.optional-dependencies]
Test_X = ["hypothesis; python_version >= '3.10'"]

[project.scripts]
tiny = "tiny:main"

[tool.flit.module]
name = "tiny"
"""


def tiny(root: Path, src: bool = False, backend: str = "") -> Path:
    """A small package, flat or src layout, with the example's backend or `backend`."""
    package = root / ("src/tiny" if src else "tiny")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""tiny"""\n', "utf-8")
    (package / "rules.py").write_text("def rate():\n    return 20\n", "utf-8")
    (package / "data.json").write_text("{}\n", "utf-8")
    if backend:
        (root / "_backend").mkdir()
        (root / "_backend/evil.py").write_text(backend, "utf-8")
    path = 'backend-path = ["_backend"]' if backend else ""
    named = '"evil"' if backend else '"flit_core.buildapi"'
    text = TINY_PYPROJECT.format(backend=named, backend_path=path)
    (root / "pyproject.toml").write_text(text, "utf-8")
    return root


# --- the gate's sources ---------------------------------------------------------------------


def imports(module: Path) -> set[str]:
    """Every module a file imports, as a dotted name (`from _gate.core import x` names
    _gate.core.x, which is a module or a name of _gate.core: either is of that folder). A
    relative import is named as written (`.x`), which no floor allows."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_bytes())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            where = "." * node.level + (node.module or "")
            names |= {f"{where}.{alias.name}" for alias in node.names}
    return names
