"""Speed ratios, measured side by side in one run (never asserted in tests).

    python -m tools.bench [--cases N]

Each benchmark prints the ratio of two runners over the same input on this machine.

Replay: the gate's three-way replay step (parent build now and patch build, each case in its
own temporary directory, across all cores) against a bare loop that starts the same invocations
with the same parallelism (the irreducible cost is starting the CLI), and against the serial
runner of seed 000.

Oracle: the example's property oracles with every call crossing to the subject worker, against
the same tests with the adapter imported into the pytest process (what the oracle did before
the worker existed), both in the same environment; the median of three runs each.

Inventory: the CPython test suite shipped with this interpreter, committed as a parent tree and
a patch tree (a few asserts dropped, a file moved, a test file added), inventoried by
scripts/count_asserts.py cold (empty cache) and warm (cache by git blob id), against seed 000's
count_asserts.py on the same two trees (reading bytes, since it crashes on the Latin-1 file).

Inventory of the example bake: the inventory step as the judge runs it (AST work and both
`pytest --collect-only` runs, parent and patch, which run concurrently), against the AST work
alone plus one collect-only run; the median of three runs each, no cache.

Judge: the whole judge (scripts/judge.py, offline, from a filled wheelhouse), warm (its
cassette, inventory and collection caches kept from a first, untimed run), on a refactor of the
example bake, with `crossrun: off` and with `crossrun: block` in the base's judge.yaml; against
the irreducible work run bare with the same parallelism: the parent, patch and oracle
environments built side by side, then the parent and patch oracle runs and every replay
invocation (each case on both builds) on a pool of one worker per core (installs and pytest
runs go through the gate's run_group, which runs one per core at once, as in the judge). The
crossrun (issue 9, after this target was set) runs the base's tests on both builds: the judge
with it is compared with the irreducible work plus those two test runs, bare. The judge with
every process of the patch's code confined (issue 22) is compared with the same judge
unconfined (`sandbox: best-effort`, the launcher capped at `none`), both fresh: nothing is
kept for an unconfined judgment, so the confined one runs with `--fresh` there. Issue 28's
bare work is the oracle and the project's tests, parent and patch, in environments built
beforehand (untimed), on one worker per core: the judge with every layer on (crossrun,
confinement, provenance, perturbations, probes) against it. Each timed judgment judges a
refactor of its own, as a second patch on the base is: the judge keeps the base's
environments and runs, never the patch's build it has not seen. The layers' floor is what a
warm judgment with every layer on must run of the code, bare (floor_runs): beside the bare
work it tells how much of the judge's cost is its layers' own runs, which no judge with those
layers can skip, and how much the judge adds to them. The nine are timed in turn,
five rounds, and each is the median of its five. Build provenance (issue 23),
the check the build step makes of both wheels against their trees, is timed alone on the
bake's build (twice, as for parent and patch, the median of five) against the judge with the
crossrun.

Project: the gate adopted into real projects' pinned histories (tools/slices.py: yamllint, a
unittest-style suite of about 430 tests; Python-Markdown, about 1,200; Flask, about 480 pytest
tests; structlog, about 850), their next four commits judged in order as they landed
(tools/adopted_history.py), each judgment's seconds against the project's own test command in
a ready environment (the judge's own pins, then the checkout built with its backend), timed
once after each judgment. Docs-only: the median of those whose builds are the parent's
(yamllint's two README edits); where none is, a README line the bench commits beside the base
(Python-Markdown; structlog, whose hatch-vcs versions every commit). Code: the second commit
that changes the build; the first,
the first judgment after the adoption, builds the base's environment and runs the base's tests,
which every later judgment finds kept (the project's ready environment is the judge's kept
one), so the later one is held to the target; the median of both is printed beside it.

Against (issue 48): today's judge held to the gate of an earlier commit of this template
(`--against REF`, by default the last before the hermetic environments), in one repository:
a base branch whose scripts/ are REF's beside the base as baked, each judging a refactor of
its own in turns, warm, ROUNDS each (the example) and AGAINST_ROUNDS each (yamllint's first
code commit after the adoption, a build of its own each round).

Select (issue 52): the judge of one code commit whose change is inside functions, on each of
two adopted slices (yamllint, about 430 tests; structlog, about 850 in more files), with the
crossrun's perturbed rerun selected (ORACLE_SELECT=on) and not (off), in turns, a build of its
own each round: the first of each (the first on the base runs the parent's tests once more to
take its record of what each test calls), then SELECT_ROUNDS warm, whose medians are compared.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from tools import adopt, adopted_history
from tools.bakery import TEMPLATE, bake, edit
from tools.slices import FLASK, MARKDOWN, STRUCTLOG, YAMLLINT, Slice

# The gate's own modules, exactly as a bake ships them.
SCRIPTS = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"
ROUNDS = 5  # of the judge benchmark
sys.path.insert(0, str(SCRIPTS))
from _gate.plugin.confine import LEVEL_VARIABLE  # noqa: E402
from _gate.runs.bytecode import write_bytecode  # noqa: E402
from _gate.runs.cases import Case, load_cases  # noqa: E402
from _gate.runs.cassettes import record, replay  # noqa: E402
from _gate.runs.collect import collect  # noqa: E402
from _gate.runs.envs import bin_dir, build_env, tools_env  # noqa: E402
from _gate.runs.perturb import Perturbation, clock_env, shifted_clock, tests_scene  # noqa: E402
from _gate.runs.provenance import compare, project_info, provenance  # noqa: E402
from _gate.runs.pytest_run import PytestOptions, Subject, run_pytest  # noqa: E402
from _gate.runs.reach import SELECT_ENV  # noqa: E402


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def build(repo: Path, scratch: Path) -> Path:
    """The example CLI installed from the offline wheelhouse, as the judge installs it."""
    wheelhouse = Path(os.environ.get("ORACLE_WHEELHOUSE", repo / ".oracle" / "wheelhouse"))
    requirements = repo / "scripts/requirements-judge.txt"
    fill = [sys.executable, str(repo / "scripts/wheelhouse.py"), "--dest", str(wheelhouse)]
    fill += ["--requirements", str(requirements), "--report", str(scratch / "wheelhouse.json")]
    subprocess.run(fill, check=True)
    python = build_env(repo, scratch / "env", wheelhouse, requirements)
    return bin_dir(python.parent.parent) / "shop"


def provenance_seconds(repo: Path, command: Path) -> float:
    """The build step's provenance check of a parent and a patch wheel, here both the bake's
    build against the bake's tree: the median of five."""
    info = project_info(command.parent.parent)

    def check() -> None:
        parent = provenance(repo, info, "base:")
        compare(parent, provenance(repo, info, "head:"), repo, "head:")

    return statistics.median(timed(check) for _ in range(5))


def seed_run_case(bin_path: Path, case: Case, cwd: Path) -> dict[str, Any]:
    """Seed 000's runner, as published: inherited environment, serial, whole-output decode;
    from `cwd`, since the example CLI writes its order store where it runs."""
    env = os.environ.copy()
    env.update(dict(case.env))
    proc = subprocess.run(
        [str(bin_path), *case.argv],
        input=case.stdin,
        env=env,
        capture_output=True,
        check=False,
        cwd=cwd,
    )
    out = proc.stdout.decode("utf-8", errors="replace")
    payload: dict[str, Any] = {"exit_code": proc.returncode, "stdout.raw": out}
    try:
        payload["stdout.json"] = json.loads(out) if out.strip() else None
    except json.JSONDecodeError:
        payload["stdout.json"] = None
    return payload


def replay_ratios(
    repo: Path, command: Path, cases: int, scratch: Path
) -> tuple[float, float, float]:
    """Seconds for: the gate's replay, a bare parallel loop, seed 000's serial runner (the last
    two from `scratch`: the gate runs each case in a directory of its own)."""
    base = load_cases(repo / "oracle/cases.yaml")
    batch = [dataclasses.replace(base[i % len(base)], id=f"case-{i}") for i in range(cases)]
    fixtures = repo / "fixtures"
    cassette = record(command, batch, fixtures, "bench")
    invocations = [case for case in batch for _side in ("parent", "patch")]

    def bare(case: Case) -> None:
        argv = [str(command), *case.argv]
        subprocess.run(argv, input=case.stdin, capture_output=True, check=False, cwd=scratch)

    def bare_parallel() -> None:
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            list(pool.map(bare, invocations))

    gate = timed(lambda: replay(batch, cassette, [command, command], fixtures))
    loop = timed(bare_parallel)
    serial = timed(lambda: [seed_run_case(command, case, scratch) for case in invocations])
    return gate, loop, serial


def example_oracle(runner: Path, repo: Path, subject: Path, *options: str) -> None:
    """The example's property oracles run by `runner` against the build of `subject`."""
    how = PytestOptions(prefix="oracle/", subject=Subject(subject), options=options)
    result = run_pytest(runner, repo / "oracle", ["."], how)
    outcomes = result.outcomes or {}
    if not outcomes or set(outcomes.values()) != {"passed"}:
        raise SystemExit(f"the example oracle did not pass: {result.output_tail}")


def oracle_ratio(repo: Path, command: Path) -> tuple[float, float]:
    """Median seconds of the example oracle through the worker, and with calls in-process."""
    python = command.parent / "python"

    def oracle(*options: str) -> Callable[[], object]:
        return lambda: example_oracle(python, repo, python, *options)

    worker = [timed(oracle()) for _ in range(3)]
    inprocess = [timed(oracle("--subject-inprocess")) for _ in range(3)]
    return sorted(worker)[1], sorted(inprocess)[1]


def seed_count_file(path: Path) -> int:
    """Seed 000's count_file, as published, except that it reads bytes."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            n += 1
        elif isinstance(node, ast.Call):
            # As the seed does: one unparse to look for pytest.fail, a second for assert names.
            if ast.unparse(node.func) in {"pytest.fail", "pytest.xfail"}:
                n += 1
                continue
            func = ast.unparse(node.func)
            n += func.startswith("self.assert") or func.endswith("assertEqual")
    return n


def seed_inventory(parent: Path, patch: Path) -> dict[str, Any]:
    a = {str(p.relative_to(parent)): seed_count_file(p) for p in sorted(parent.rglob("test_*.py"))}
    b = {str(p.relative_to(patch)): seed_count_file(p) for p in sorted(patch.rglob("test_*.py"))}
    return {"parent_total": sum(a.values()), "patch_total": sum(b.values())}


def git(repo: Path, *args: str) -> str:
    identity = ("-c", "user.name=bench", "-c", "user.email=bench@localhost")
    return subprocess.run(
        ["git", *identity, *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def droppable(line: bytes) -> bool:
    return b"self.assert" in line and line.rstrip().endswith(b")")


def suite_trees(scratch: Path) -> tuple[Path, Path, str, str]:
    """The CPython test suite as a parent commit and a small patch on top of it."""
    repo = scratch / "suite"
    source = Path(sysconfig.get_paths()["stdlib"]) / "test"
    for path in source.rglob("test_*.py"):
        target = repo / "tests" / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    git(repo.parent, "init", "-q", str(repo))
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "parent")
    base = git(repo, "rev-parse", "HEAD")
    files = [
        p
        for p in sorted((repo / "tests").glob("test_*.py"))
        if any(droppable(line) for line in p.read_bytes().splitlines())
    ]
    for path in files[:5]:
        lines = path.read_bytes().splitlines(keepends=True)
        drop = next(i for i, line in enumerate(lines) if droppable(line))
        path.write_bytes(b"".join(lines[:drop] + lines[drop + 1 :]))
    git(repo, "mv", "tests/test_list.py", "tests/test_list_moved.py")
    (repo / "tests/test_new.py").write_text("def test_new() -> None:\n    assert 1 + 1 == 2\n")
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "patch")
    parent = scratch / "parent"
    git(repo, "worktree", "add", "-q", "--detach", str(parent), base)
    return parent, repo, base, git(repo, "rev-parse", "HEAD")


def inventory_ratios(scratch: Path) -> tuple[float, float, float]:
    """Seconds for: seed 000 on both trees, the gate cold, the gate warm."""
    parent, patch, base, head = suite_trees(scratch)
    cache = scratch / "inventory-cache.json"
    cmd = [
        sys.executable,
        str(SCRIPTS / "count_asserts.py"),
        "--parent",
        str(parent),
        "--patch",
        str(patch),
        "--tests",
        "tests",
        "--repo",
        str(patch),
        "--base",
        base,
        "--head",
        head,
        "--cache",
        str(cache),
        "--report",
        str(scratch / "inventory.json"),
    ]
    seed = timed(lambda: seed_inventory(parent / "tests", patch / "tests"))
    cold = timed(lambda: subprocess.run(cmd, capture_output=True, check=False))
    findings = json.loads((scratch / "inventory.json").read_text())["evidence"]["findings"]
    warm = timed(lambda: subprocess.run(cmd, capture_output=True, check=False))
    rules = sorted({f["rule"] for f in findings})
    print(f"  inventory of the patch: {len(findings)} findings ({', '.join(rules)})")
    return seed, cold, warm


def bake_inventory_ratio(
    repo: Path, python: Path, scratch: Path
) -> tuple[float, float, float, float, float]:
    """Median seconds of: the inventory step with collection, its AST work alone, one
    collect-only run; on the example bake against a patch that adds a test. Then, for that
    changed-test patch, the judge's work before the probes (the inventory step, and the advisory
    step running the patch's tests) and with them (the inventory step given the crossrun's
    report runs the patch's tests, compares their checks and probes the new one; the advisory
    step reuses its run)."""
    (repo / "tests/test_bench.py").write_text("def test_bench() -> None:\n    assert 1 + 1 == 2\n")
    git(repo, "checkout", "-q", "-b", "bench")
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "bench patch")
    trees = {}
    for side, ref in (("parent", "main"), ("patch", "bench")):
        trees[side] = scratch / side
        git(repo, "worktree", "add", "-q", "--detach", str(trees[side]), ref)
    cmd = [sys.executable, str(SCRIPTS / "count_asserts.py"), "--parent", str(trees["parent"])]
    cmd += ["--patch", str(trees["patch"]), "--repo", str(repo), "--base", "main"]
    cmd += ["--head", "bench", "--config", str(trees["parent"] / "oracle/judge.yaml")]
    cmd += ["--report", str(scratch / "inventory.json")]
    builds = ["--parent-python", str(python), "--patch-python", str(python)]

    def step(*extra: str) -> Callable[[], object]:
        def run() -> None:
            proc = subprocess.run([*cmd, *extra], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"the inventory step did not pass: {proc.stderr.strip()}")

        return run

    def collect_once() -> None:
        if collect(python, trees["parent"], ["tests"], [], autoload=False).ids is None:
            raise SystemExit("collect-only failed on the example bake")

    scripts = trees["parent"] / "scripts"
    crossran = scratch / "crossrun.json"
    cross = [sys.executable, str(scripts / "crossrun.py"), "--tree", str(trees["parent"])]
    cross += ["--parent-python", str(python), "--patch-python", str(python), "--same-build"]
    subprocess.run([*cross, "--perturb", "", "--report", str(crossran)], check=True)
    advisory = [sys.executable, str(scripts / "advisory_tests.py"), "--tree", str(trees["patch"])]
    advisory += ["--python", str(python), "--report", str(scratch / "tests.json")]

    def before_probes() -> None:
        step(*builds)()
        subprocess.run(advisory, capture_output=True, check=True)

    full = sorted(timed(step(*builds)) for _ in range(3))[1]
    ast_only = sorted(timed(step()) for _ in range(3))[1]
    one = sorted(timed(collect_once) for _ in range(3))[1]
    before = sorted(timed(before_probes) for _ in range(3))[1]
    probed = sorted(timed(step(*builds, "--crossrun-report", str(crossran))) for _ in range(3))[1]
    return full, ast_only, one, before, probed


def judge_seconds(repo: Path, scratch: Path) -> tuple[float, ...]:
    """Median wall seconds, warm, of the judge on a refactor with the crossrun and with it
    off, of the irreducible work, of it with the crossrun's test runs, and of the judge with
    the crossrun unconfined (sandbox: best-effort, the launcher capped at none), of it with
    no perturbed run (perturb: []: replay, oracle and crossrun), and of the judge with
    --fresh (nothing kept or reused, as unconfined), over ROUNDS."""
    wheelhouse = Path(os.environ.get("ORACLE_WHEELHOUSE", repo / ".oracle" / "wheelhouse"))
    git(repo, "checkout", "-q", "-b", "bench-off")
    edit(repo / "oracle/judge.yaml", "crossrun: block", "crossrun: off")
    git(repo, "commit", "-q", "-am", "crossrun off")
    git(repo, "checkout", "-q", "-b", "bench-unconfined", "main")
    edit(repo / "oracle/judge.yaml", "sandbox: required", "sandbox: best-effort")
    git(repo, "commit", "-q", "-am", "sandbox best-effort")
    git(repo, "checkout", "-q", "-b", "bench-unperturbed", "main")
    edit(repo / "oracle/judge.yaml", "perturb: [env, clock, terminal, files]", "perturb: []")
    git(repo, "commit", "-q", "-am", "no perturbed run")
    confined = {**os.environ, "JUDGE_OFFLINE": "1"}
    unconfined = {**confined, LEVEL_VARIABLE: "none"}

    def refactor(base: str, name: str) -> str:
        git(repo, "checkout", "-q", "-b", name, base)
        with (repo / "src/shop/__init__.py").open("a", encoding="utf-8") as out:
            out.write(f"\n# a comment: the smallest refactor ({name})\n")
        git(repo, "commit", "-q", "-am", "refactor")
        git(repo, "checkout", "-q", "main")
        return name

    def judged(base: str, *extra: str) -> Callable[[], object]:
        """Each run judges a refactor of its own, as a second patch on the base is: the
        judge keeps what the base's build ran, never the patch's build it has not seen."""
        env = unconfined if base == "bench-unconfined" else confined
        tag = "-fresh" if extra else ""
        heads = iter([refactor(base, f"{base}-refactor{tag}-{n}") for n in range(ROUNDS + 1)])

        def run() -> None:
            cmd = [sys.executable, str(repo / "scripts/judge.py"), "--repo", str(repo), *extra]
            cmd += ["--base", base, "--head", next(heads), "--wheelhouse", str(wheelhouse)]
            cmd += ["--reports", str(scratch / "judge-reports")]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            if proc.returncode != 0:
                raise SystemExit(f"the judge did not merge the refactor: {proc.stdout[-800:]}")

        return run

    judges = [judged(base) for base in ("main", "bench-off", "bench-unconfined")]
    judges += [judged("bench-unperturbed"), judged("main", "--fresh")]
    for warm in judges:  # warm: the cassette is recorded and the caches filled once
        warm()
    with_crossrun, off, unconfined_run, unperturbed, fresh = judges
    # The bare work a user cannot avoid (issue 28): the oracle and the project's tests, parent
    # and patch, in environments built beforehand.
    ready = bare_envs(repo, wheelhouse, scratch / "ready")
    runs = (
        with_crossrun,
        off,
        lambda: irreducible(repo, wheelhouse, scratch),
        lambda: irreducible(repo, wheelhouse, scratch, tests=True),
        unconfined_run,
        unperturbed,
        fresh,
        lambda: bare_runs(repo, scratch, ready, tests=True, invocations=False),
        lambda: floor_runs(repo, scratch, ready),
    )
    # Interleaved rounds, so that a machine that slows down or speeds up meanwhile weighs on
    # the judge and on the bare work alike; the median of each.
    rounds = [[timed(run) for run in runs] for _ in range(ROUNDS)]
    return tuple(statistics.median(times) for times in zip(*rounds, strict=True))


def irreducible(repo: Path, wheelhouse: Path, scratch: Path, tests: bool = False) -> None:
    """What no judge can skip, run bare: three environments built side by side, then both
    oracle runs and every replay invocation on one worker per core (and with `tests`, the
    crossrun's two runs of the base's tests, one per build)."""
    envs = scratch / "irreducible"
    shutil.rmtree(envs, ignore_errors=True)
    bare_runs(repo, scratch, bare_envs(repo, wheelhouse, envs), tests=tests)


def bare_envs(repo: Path, wheelhouse: Path, envs: Path) -> tuple[Path, Path, Path]:
    """The parent's, the patch's and the oracle's pythons, built side by side, with their
    bytecode written (a user's environment has it after its first run)."""
    requirements = repo / "scripts/requirements-judge.txt"

    def ready(side: str) -> Path:
        if side == "oracle":
            python = tools_env(envs / side, wheelhouse, requirements)[0]
        else:
            python = build_env(repo, envs / side, wheelhouse, requirements)
        write_bytecode(python.parent.parent)
        return python

    with ThreadPoolExecutor(max_workers=3) as pool:
        parent, patch, oracle = pool.map(ready, ("parent", "patch", "oracle"))
    return parent, patch, oracle


def bare_runs(
    repo: Path,
    scratch: Path,
    pythons: tuple[Path, Path, Path],
    tests: bool = False,
    invocations: bool = True,
) -> None:
    """Both oracle runs, and with `tests` both runs of the project's tests, and with
    `invocations` every case on both builds, on one worker per core."""
    parent, patch, oracle_python = pythons
    cases = load_cases(repo / "oracle/cases.yaml") if invocations else []
    commands = [bin_dir(python.parent.parent) / "shop" for python in (parent, patch)]
    runs = [partial(example_oracle, oracle_python, repo, python) for python in (parent, patch)]
    runs += [partial(project_tests, python, repo) for python in (parent, patch) if tests]
    runs += [partial(invoke, command, case, scratch) for case in cases for command in commands]
    on_every_core(runs)


def invoke(command: Path, case: Case, scratch: Path, clock: dict[str, str] | None = None) -> None:
    """One case's run by `command`, bare, in `scratch` (`clock`: a shifted clock's variables)."""
    argv, env = [str(command), *case.argv], {**os.environ, **(clock or {})}
    subprocess.run(argv, input=case.stdin, capture_output=True, check=False, cwd=scratch, env=env)


def on_every_core(runs: Sequence[Callable[[], object]]) -> None:
    """Each of `runs`, one worker per core, until all have ended."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for run in [pool.submit(run) for run in runs]:
            run.result()


def project_tests(python: Path, repo: Path, how: Perturbation | None = None) -> None:
    """The project's own tests on the build of `python`, as the crossrun runs them (`how`: its
    perturbed run, in a user's scene under the shifted clock)."""
    with tests_scene(how, python.parent) as scene:
        options = PytestOptions(own_config=True, writable=scene.writable, scene=scene.env)
        run_pytest(python, repo, ["tests"], options)


def floor_runs(repo: Path, scratch: Path, pythons: tuple[Path, Path, Path]) -> None:
    """What a warm judgment with every layer on must run of the code, bare, on one worker per
    core: the patch's oracle and its tests, each twice (the second stands for the perturbed
    run: the tests in a user's scene under the shifted clock, as the crossrun's), and every
    case on both builds (the parent's run is the drift check) and in its two perturbed runs
    on the patch (the clock one under the shifted clock). The parent's oracle and tests runs
    are left out, as the judge keeps them, and so are the build, the inventory and every
    harness cost."""
    parent, patch, oracle_python = pythons
    cases = load_cases(repo / "oracle/cases.yaml")
    parent_cli, patch_cli = (bin_dir(python.parent.parent) / "shop" for python in (parent, patch))
    clock = shifted_clock(datetime.date.today())
    shifted = clock_env(clock)
    runs = [partial(example_oracle, oracle_python, repo, patch) for _ in range(2)]
    perturbed = Perturbation(("env", "clock"), clock)  # as the crossrun's (crossrun.PERTURBED)
    runs += [partial(project_tests, patch, repo, how) for how in (None, perturbed)]
    jobs = [(parent_cli, {}), (patch_cli, {}), (patch_cli, {}), (patch_cli, shifted)]
    runs += [partial(invoke, cli, case, scratch, clock) for case in cases for cli, clock in jobs]
    on_every_core(runs)


def strength_seconds(repo: Path, scratch: Path) -> tuple[float, float]:
    """`strength.py` on the whole example (properties, cassettes and the project's tests; no
    proposals) against `mutmut run` bare on the project's own tests, in the session's
    environment (made first, untimed), on the same cores."""
    subprocess.run(["nox", "-s", "strength", "--install-only"], cwd=repo, check=True)
    python = str(repo / ".nox" / "strength" / "bin" / "python")
    measure = [python, "scripts/strength.py", "--propose", "0", "--report", str(scratch / "s.json")]
    gate = timed(lambda: subprocess.run(measure, cwd=repo, check=True, capture_output=True))
    bare = Path(shutil.copytree(repo, scratch / "bare", ignore=shutil.ignore_patterns(".nox")))
    with (bare / "pyproject.toml").open("a", encoding="utf-8") as handle:
        handle.write('\n[tool.mutmut]\nsource_paths = ["src"]\n')
        handle.write('pytest_add_cli_args_test_selection = ["tests"]\n')
    mutmut = [python, "-m", "mutmut", "run"]
    alone = timed(lambda: subprocess.run(mutmut, cwd=bare, check=True, capture_output=True))
    return gate, alone


def project_seconds(work: Path, piece: Slice) -> tuple[float, float, float, float]:
    """Seconds of the judge of a slice's next four commits as they landed (the docs-only ones'
    median, else of a README line the bench commits; the first code commit after the adoption,
    the next) and the median of the project's own test command in a ready environment."""
    wheelhouse = adopted_history.adopted_wheelhouse()  # as the suite's adoptions fill it
    repo, commits = piece.prepared(work, wheelhouse)
    env = work / "ready"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = bin_dir(env) / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse)]
    own = [str(python), *piece.tests]
    judged: dict[bool, list[float]] = {True: [], False: []}  # same build -> seconds
    alone = []
    for commit in commits[:4]:
        row = adopted_history.judge(repo, commit, wheelhouse)
        judged[row.same_build].append(row.seconds)
        # The judge's own pins (the project's and its tests' requirements as adopt resolved
        # them, --as-of included, and its build backend), then the checkout built with them.
        subprocess.run([*pip, "-r", str(repo / "scripts" / "requirements-judge.txt")], check=True)
        subprocess.run([*pip, "--no-deps", "--no-build-isolation", str(repo)], check=True)
        alone.append(timed(lambda: subprocess.run(own, cwd=repo, check=True, capture_output=True)))
    if not judged[True]:  # none of them is docs-only: a README line is
        judged[True].append(adopted_history.judge(repo, docs_commit(repo), wheelhouse).seconds)
    first, code = judged[False][:2]  # the first judgment after the adoption, and a later one
    return statistics.median(judged[True]), first, code, statistics.median(alone)


def docs_commit(repo: Path) -> str:
    """A commit beside the base that adds a line to the README: a docs-only change."""
    base = adopted_history.BASE
    git(repo, "checkout", "-q", "-b", "bench-docs", base)
    with (repo / "README.md").open("a", encoding="utf-8") as readme:
        readme.write("\nA line of documentation.\n")
    git(repo, "commit", "-q", "--no-verify", "-am", "docs: a line")
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", base)
    return sha


def project_report(piece: Slice, work: Path) -> None:
    docs, first, code, alone = project_seconds(work, piece)
    print(f"the gate adopted into {piece.name}'s history, each commit judged as it landed")
    print(f"  own test command   {alone:8.2f} s   (ready environment: {' '.join(piece.tests)})")
    for label, seconds, target in (("docs-only", docs, 1.0), ("code", code, 2.5)):
        shown = f"judge / own tests = {seconds / alone:5.2f}  (<= {target})"
        print(f"  {label + ' commit':18} {seconds:8.2f} s   {shown}")
    print(f"  first code commit  {first:8.2f} s   (after the adoption: the base built, run)")
    both = statistics.median([first, code])
    print(f"  both code commits  {both:8.2f} s   judge / own tests = {both / alone:5.2f}")


# The gate before issue 48 (hermetic environments): `--only against` holds today's to it.
BEFORE = "d366c73"
AGAINST_ROUNDS = 3  # of the yamllint half of `against`: a judgment there takes a minute


def older_scripts(ref: str, dest: Path) -> Path:
    """The gate's scripts/ as the template held them at `ref`, with the noxfile beside them
    that imports from them and the decision table its preconditions check (no answer of the
    bake is in any of them), in `dest`."""
    dest.mkdir(parents=True)
    slug = "{{cookiecutter.project_slug}}"
    archive = subprocess.run(
        ["git", "-C", str(TEMPLATE), "archive", ref, *(f"{slug}/{path}" for path in OLDER)],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / slug / "scripts"


OLDER = ("scripts", "noxfile.py", "oracles/MATRIX.md")  # what an older gate comes with


def judged_by(repo: Path, scripts: Path, base: str, name: str) -> str:
    """`base` with the gate's code in scripts/ replaced by `scripts`' (its pins, which adopt
    fills with the project's, stay the base's): a branch `name` whose judge is that gate
    (nox -s judge runs the base checkout's scripts)."""
    git(repo, "checkout", "-q", "-b", name, base)
    for path in (repo / "scripts").glob("*.py"):
        path.unlink()
    shutil.rmtree(repo / "scripts" / "_gate")
    for path in scripts.glob("*.py"):
        shutil.copy(path, repo / "scripts" / path.name)
    shutil.copytree(scripts / "_gate", repo / "scripts" / "_gate")
    # The gate's sessions import from its scripts: they go together (an adopted repository
    # with a noxfile of its own has the gate's in noxfile_oracle.py).
    own = repo / adopt.GATE_NOXFILE
    noxfile = own if own.exists() else repo / "noxfile.py"
    shutil.copy(scripts.parent / "noxfile.py", noxfile)
    shutil.copy(scripts.parent / "oracles" / "MATRIX.md", repo / "oracles" / "MATRIX.md")
    known_settings(repo / "oracle" / "judge.yaml", scripts)
    git(repo, "add", "-A", "scripts", "oracle", "oracles", noxfile.name)
    git(repo, "commit", "-q", "--no-verify", "-m", f"the gate's scripts of {name}")
    git(repo, "checkout", "-q", base)
    return name


def known_settings(config: Path, scripts: Path) -> None:
    """judge.yaml without the settings the older gate in `scripts` does not know (it fails
    closed on an unknown field): a newer bake's defaults, such as an empty `capabilities:`."""
    ask = "from _gate.core.config import CONFIG_TYPES; print(*CONFIG_TYPES)"
    known = subprocess.run(
        [sys.executable, "-c", ask],
        cwd=scripts,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    settings = yaml.safe_load(config.read_text("utf-8"))
    if set(settings) - set(known):
        kept = {key: value for key, value in settings.items() if key in known}
        config.write_text(yaml.safe_dump(kept, sort_keys=False), "utf-8")


def patched(repo: Path, base: str, name: str, change: Callable[[], None]) -> str:
    git(repo, "checkout", "-q", "-b", name, base)
    change()
    git(repo, "commit", "-q", "--no-verify", "-am", name)
    git(repo, "checkout", "-q", base)
    return name


def against_example(repo: Path, older: Path) -> tuple[float, float]:
    """Median wall seconds, warm, of the judge (every layer on) of a refactor of the example,
    by today's gate and by the gate of `older`'s scripts, in turns, ROUNDS each."""
    bases = {"now": "main", "then": judged_by(repo, older, "main", "then")}
    env = {**os.environ, "JUDGE_OFFLINE": "1"}
    wheelhouse = Path(os.environ.get("ORACLE_WHEELHOUSE", repo / ".oracle" / "wheelhouse"))

    def judged(side: str, n: int) -> float:
        def comment() -> None:
            with (repo / "src/shop/__init__.py").open("a", encoding="utf-8") as out:
                out.write(f"\n# the smallest refactor ({side} {n})\n")

        head = patched(repo, bases[side], f"{side}-refactor-{n}", comment)
        git(repo, "checkout", "-q", bases[side])
        cmd = [sys.executable, "scripts/judge.py", "--repo", str(repo), "--base", bases[side]]
        cmd += ["--head", head, "--wheelhouse", str(wheelhouse), "--reports", "bench-reports"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=False, env=env)
        seconds = time.perf_counter() - start
        git(repo, "checkout", "-q", "main")
        if proc.returncode != 0:
            raise SystemExit(f"the {side} gate did not merge the refactor: {proc.stdout[-800:]}")
        return seconds

    for side in bases:  # warm: the cassette recorded, the base's environments kept
        judged(side, 0)
    rounds = [[judged(side, n) for side in bases] for n in range(1, ROUNDS + 1)]
    now, then = (statistics.median(times) for times in zip(*rounds, strict=True))
    return now, then


def against_project(work: Path, older: Path) -> tuple[float, float]:
    """Median wall seconds of the judge of yamllint's first code commit after the adoption,
    on a base judged before (its environments kept), by today's gate and by `older`'s."""
    wheelhouse = adopted_history.adopted_wheelhouse()
    repo, commits = YAMLLINT.prepared(work, wheelhouse)
    code = commits[0]  # code, README, README, code: the first changes code
    base = adopted_history.BASE
    bases = {"now": base, "then": judged_by(repo, older, base, "then")}

    def judged(side: str, n: int) -> float:
        return merged_seconds(repo, wheelhouse, (bases[side], code), f"{side}-code-{n}")

    for side in bases:
        judged(side, 0)
    rounds = [[judged(side, n) for side in bases] for n in range(1, AGAINST_ROUNDS + 1)]
    now, then = (statistics.median(times) for times in zip(*rounds, strict=True))
    return now, then


def merged_seconds(
    repo: Path,
    wheelhouse: Path,
    picked: tuple[str, str],
    head: str,
    env: dict[str, str] | None = None,
) -> float:
    """Wall seconds of the judge of `picked` (a commit cherry-picked onto a base) as the
    branch `head`, which must merge: a comment appended to its first changed module gives the
    branch a build of its own (a comment is no changed line of code: nothing else differs)."""
    base, code = picked
    git(repo, "checkout", "-q", "-b", head, base)
    parents = git(repo, "rev-list", "--parents", "-1", code).split()
    git(repo, "cherry-pick", "--no-commit", *(["-m", "1"] if len(parents) > 2 else []), code)
    changed = git(repo, "diff", "--cached", "--name-only", "--", "*.py").split()
    module = next(name for name in changed if not name.startswith(("tests/", "test/")))
    with (repo / module).open("a", encoding="utf-8") as out:
        out.write(f"\n# judged as {head}\n")
    git(repo, "commit", "-q", "--no-verify", "-am", head)
    git(repo, "checkout", "-q", base)
    report = repo / "reports/judge-report.json"
    report.unlink(missing_ok=True)  # the verdict read after is this judgment's or none
    start = time.perf_counter()
    judge = ["-s", "judge", "--", "--base", base, "--head", head]
    adopted_history.nox(repo, wheelhouse, *judge, check=False, env=env)
    seconds = time.perf_counter() - start
    git(repo, "checkout", "-q", adopted_history.BASE)
    if not report.is_file():
        raise SystemExit(f"the judge left no report on {head} in {repo}")
    verdict = json.loads(report.read_text("utf-8"))["verdict"]
    if verdict != "merge":
        raise SystemExit(f"the judge did not merge {head} in {repo}: {verdict}")
    return seconds


# Safe test selection: a code commit of each slice whose change is inside functions, by the
# start of its subject (yamllint's indentation rule, whose tests run in the middle of its
# suite; structlog's TimeStamper, the larger suite). A change every test file reaches (the
# linter, a rule every lint runs: yamllint's truthy commit) selects every test.
SELECTED = ((YAMLLINT, "indentation: Fix error"), (STRUCTLOG, "TimeStamper now returns UTC"))
SELECT_ROUNDS = 3


def select_seconds(work: Path, piece: Slice, subject: str) -> dict[str, list[float]]:
    """Wall seconds of the judge of one code commit on the adopted base, perturbed reruns
    selected (`on`) and not (`off`), in turns: the first of each (the first on the base takes
    the parent's record of what each test calls), then SELECT_ROUNDS warm."""
    wheelhouse = adopted_history.adopted_wheelhouse()
    repo, commits = piece.prepared(work, wheelhouse)
    code = next(c for c in commits if git(repo, "log", "-1", "--format=%s", c).startswith(subject))
    picked = (adopted_history.BASE, code)
    found: dict[str, list[float]] = {"on": [], "off": []}
    for n in range(SELECT_ROUNDS + 1):
        for mode, seconds in found.items():
            env = {SELECT_ENV: mode}
            seconds.append(merged_seconds(repo, wheelhouse, picked, f"select-{mode}-{n}", env))
    return found


def bench_select(args: argparse.Namespace, tmp: Path) -> None:
    print("safe test selection: the judge of a code commit, perturbed reruns selected or not")
    for piece, subject in SELECTED:
        found = select_seconds(scratch(tmp, f"select-{piece.name}"), piece, subject)
        on, off = (statistics.median(found[mode][1:]) for mode in ("on", "off"))
        print(f"  {piece.name}: {subject}")
        shown = f"on / off = {on / off:5.2f}  (< 1)"
        print(f"    warm, median of {SELECT_ROUNDS}  on {on:8.2f} s   off {off:8.2f} s   {shown}")
        first_on, first_off = found["on"][0], found["off"][0]
        print(f"    first on the base   on {first_on:8.2f} s   off {first_off:8.2f} s")


def scratch(tmp: Path, name: str) -> Path:
    """A folder of its own for one benchmark: each makes worktrees named parent and patch."""
    path = tmp / name
    path.mkdir()
    return path


def bench_replay(args: argparse.Namespace, tmp: Path) -> None:
    repo = bake(tmp / "bake")
    gate, loop, serial = replay_ratios(
        repo, build(repo, tmp), args.cases, scratch(tmp, "runs-replay")
    )
    print(f"replay of {args.cases} cases (2 invocations each) on {os.cpu_count()} cores")
    print(f"  gate replay        {gate:8.2f} s")
    print(f"  bare loop          {loop:8.2f} s   gate / bare = {gate / loop:5.2f}  (<= 1.25)")
    ratio = serial / gate
    print(f"  seed 000 serial    {serial:8.2f} s   seed / gate = {ratio:5.2f}  (>= 1.8)")


def bench_oracle(args: argparse.Namespace, tmp: Path) -> None:
    repo = bake(tmp / "bake-oracle")
    worker, inprocess = oracle_ratio(repo, build(repo, tmp / "oracle"))
    print("property oracles of the example, every call through the subject worker")
    print(f"  in-process calls   {inprocess:8.2f} s")
    ratio = worker / inprocess
    print(f"  worker calls       {worker:8.2f} s   worker / in-process = {ratio:5.2f}", end="")
    print("  (<= 1.5)")


def bench_inventory(args: argparse.Namespace, tmp: Path) -> None:
    seed, cold, warm = inventory_ratios(scratch(tmp, "trees-cpython"))
    print("inventory of the CPython test suite, parent and patch trees")
    print(f"  seed 000           {seed:8.2f} s")
    print(f"  gate cold          {cold:8.2f} s   seed / cold = {seed / cold:5.2f}  (>= 3)")
    print(f"  gate warm          {warm:8.2f} s   warm / cold = {warm / cold:5.2f}  (<= 0.10)")


def bench_inventory_bake(args: argparse.Namespace, tmp: Path) -> None:
    repo = bake(tmp / "bake-inventory")
    python = build(repo, tmp / "inventory-bake").parent / "python"
    measured = bake_inventory_ratio(repo, python, scratch(tmp, "trees-bake"))
    full, ast_only, one, before, probed = measured
    print("inventory step on the example bake, collect-only on parent and patch")
    print(f"  AST work alone     {ast_only:8.2f} s")
    print(f"  one collect-only   {one:8.2f} s")
    ratio = full / (ast_only + one)
    shown = f"step / (AST + collect) = {ratio:5.2f}  (<= 1.5)"
    print(f"  inventory step     {full:8.2f} s   {shown}")
    print(f"  + advisory tests   {before:8.2f} s   (the tests step runs the patch's tests)")
    shown = f"probed / (step + tests) = {probed / before:5.2f}  (<= 1.3)"
    print(f"  probed inventory   {probed:8.2f} s   {shown}; / step = {probed / full:5.2f}")


def bench_judge(args: argparse.Namespace, tmp: Path) -> None:
    repo = bake(tmp / "bake-judge")
    command = build(repo, tmp / "judge")  # fills the wheelhouse
    timings = judge_seconds(repo, scratch(tmp, "trees-judge"))
    with_crossrun, without, bare, tests, unconfined, unperturbed, fresh, ready, floor = timings
    print(f"whole judge of a refactor of the example bake, warm, {os.cpu_count()} cores")
    print(f"  bare, ready envs   {ready:8.2f} s   (oracle and tests, parent and patch)")
    shown = f"judge / bare, ready = {with_crossrun / ready:5.2f}  (<= 1.5)"
    print(f"  judge, every layer {with_crossrun:8.2f} s   {shown}")
    shown = f"floor / bare, ready = {floor / ready:5.2f}; judge / floor = "
    print(f"  the layers' floor  {floor:8.2f} s   {shown}{with_crossrun / floor:5.2f}")
    print(f"  irreducible work   {bare:8.2f} s")
    ratio = without / bare
    shown = f"judge / irreducible = {ratio:5.2f}  (<= 1.3)"
    print(f"  crossrun off       {without:8.2f} s   {shown}")
    print(f"  irreducible, tests {tests:8.2f} s   (with the crossrun's two test runs)")
    ratio = with_crossrun / tests
    shown = f"judge / (irreducible, tests) = {ratio:5.2f}  (<= 1.3)"
    print(f"  crossrun block     {with_crossrun:8.2f} s   {shown}")
    # Nothing is kept for an unconfined judgment: it is held to a confined one that
    # keeps nothing either (--fresh), not to one that reuses kept environments.
    print(f"  confined, --fresh  {fresh:8.2f} s   (nothing kept or reused)")
    shown = f"confined / unconfined = {fresh / unconfined:5.2f}  (<= 1.1, both fresh)"
    print(f"  unconfined         {unconfined:8.2f} s   {shown}")
    shown = f"perturbed / unperturbed = {with_crossrun / unperturbed:5.2f}  (<= 1.5)"
    print(f"  no perturbed run   {unperturbed:8.2f} s   {shown}")
    checked = provenance_seconds(repo, command)
    shown = f"provenance / judge = {checked / with_crossrun:6.3f}  (<= 0.05)"
    print(f"  build provenance   {checked:8.2f} s   {shown}")


def bench_project(args: argparse.Namespace, tmp: Path) -> None:
    for piece in (YAMLLINT, MARKDOWN, FLASK, STRUCTLOG):
        project_report(piece, scratch(tmp, f"project-{piece.name}"))


def bench_against(args: argparse.Namespace, tmp: Path) -> None:
    older = older_scripts(args.against, tmp / "older")
    now, then = against_example(bake(tmp / "bake-against"), older)
    print(f"the judge against the gate of {args.against}, warm, every layer on")
    shown = f"now / then = {now / then:5.2f}  (<= 1.1)"
    print(f"  example refactor   {now:8.2f} s   then {then:6.2f} s   {shown}")
    now, then = against_project(scratch(tmp, "project-against"), older)
    shown = f"now / then = {now / then:5.2f}  (<= 1.1)"
    print(f"  yamllint code      {now:8.2f} s   then {then:6.2f} s   {shown}")


def bench_strength(args: argparse.Namespace, tmp: Path) -> None:
    repo = bake(tmp / "bake-strength")
    gate, alone = strength_seconds(repo, scratch(tmp, "strength"))
    print(f"oracle strength of the example bake (mutmut, {os.cpu_count()} cores)")
    print(f"  mutmut bare, tests {alone:8.2f} s   (the project's own tests only)")
    shown = f"strength / bare = {gate / alone:5.2f}  (properties, cassettes, tests)"
    print(f"  nox -s strength    {gate:8.2f} s   {shown}")


# Every benchmark, in the order a whole run runs them.
BENCHES: dict[str, Callable[[argparse.Namespace, Path], None]] = {
    "replay": bench_replay,
    "oracle": bench_oracle,
    "inventory": bench_inventory,
    "inventory-bake": bench_inventory_bake,
    "judge": bench_judge,
    "project": bench_project,
    "against": bench_against,
    "select": bench_select,
    "strength": bench_strength,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="cassette cases to replay")
    parser.add_argument(
        "--only",
        choices=tuple(BENCHES),
        help="run one benchmark",
    )
    parser.add_argument(
        "--against",
        default=BEFORE,
        metavar="REF",
        help=f"the template commit whose gate `against` holds today's to (default {BEFORE}, "
        "the last before issue 48's hermetic environments)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oracle-bench-") as name:
        for bench, run in BENCHES.items():
            if args.only in (None, bench):
                run(args, Path(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
