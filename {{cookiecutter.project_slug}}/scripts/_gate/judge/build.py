"""The build step: the oracle environment (sealed) and the parent's and the patch's builds,
kept between judgments where their inputs did not change, checked against their trees, with
the `trees` lane's steps beside them."""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from _gate.change.lines import changed_files, installed
from _gate.change.scopes import changed_functions
from _gate.core.context import Builds, ChangedFile, ChangedFunctions, Judgment
from _gate.core.protocol import (
    BLOCK,
    FAIL_CLOSED,
    PASS,
    STATUS,
    FailClosed,
    NotInWheelhouse,
    Report,
)
from _gate.core.seal import Seal, build_digest, seal, write_sealed
from _gate.core.steps import STEPS, TREES
from _gate.judge.lanes import Judge, table
from _gate.runs.bytecode import write_bytecode
from _gate.runs.entry import Contract
from _gate.runs.envs import tools_env
from _gate.runs.kept_envs import (
    CHANGED,
    KEPT,
    Cache,
    base_build,
    env_limit,
    evict,
    kept_env,
    oracle_env_key,
    parent_env_key,
)
from _gate.runs.oracle_run import has_tests
from _gate.runs.provenance import (
    compare,
    package_modules,
    project_info,
    provenance,
    summary,
    wheel_metadata,
)
from _gate.runs.reuse import REUSED, cache_folder, prune, runs_limit


def build_all(judge: Judge, envs: Path, wheelhouse: Path) -> Builds | None:
    """Build the oracle env (sealed) and the parent side by side, then the patch once the
    oracle env is sealed, and beside them run the steps of the `trees` lane (which read trees
    only; reported first). A base without property oracles gets no oracle env: nothing would
    run in it. The base not building is ours."""
    j, start = judge.j, time.monotonic()
    envs.mkdir(exist_ok=True)  # the seal is written here, whether the environments are or not
    cache, kept_in, runs = kept_for(judge)
    b = Building(judge, envs, wheelhouse, kept_in, runs)
    with ThreadPoolExecutor(max_workers=6) as pool:
        beside = pool.submit(lambda: [judge.conclude(step) for step in table(judge, TREES)])
        room = pool.submit(b.make_room) if kept_in is not None else None
        oracle = pool.submit(b.oracle) if has_tests(j.parent / "oracle") else None

        def patch_build() -> tuple[Path, str] | None:
            # The patch's build backend is the first of its code to run: it starts once the
            # oracle environment is built and sealed, and not at all when that failed.
            if oracle is not None and oracle.exception() is not None:
                return None
            return b.side("patch", j.patch, patch_donor)

        def patch_donor() -> Path | None:
            # Never waits: the parent's build may wait for the lock this build holds (a
            # commit judged against itself keys both environments alike). The oracle's is
            # built by now (the patch's build starts after it).
            done = [job for job in (jobs["parent"], oracle) if job is not None and job.done()]
            return next(filter(None, map(env_of, done)), None)

        jobs: dict[str, Future[Any]] = {"oracle": oracle} if oracle is not None else {}
        # Each build takes the bytecode of an environment built before it (_gate/runs/bytecode.py):
        # the parent's the oracle's, the patch's the parent's (or the oracle's, where the
        # parent's is not built yet).
        jobs["parent"] = pool.submit(b.side, "parent", j.parent, lambda: env_of(oracle))
        jobs["patch"] = pool.submit(patch_build)
        early = pool.submit(taken_beside, judge, jobs["parent"], jobs["patch"])
    for done in beside.result():
        judge.append(*done)
    if room is not None:
        room.result()
    built = waited_builds(judge, jobs, start)
    if built is None:
        return None
    seconds = time.monotonic() - start
    return checked_builds(judge, built, seconds, b.came, cache=cache, beside=early.result())


@dataclass
class Building:
    """One judgment's environments under way: where they go, what keys them in the cache, and
    how each came (built fresh, or kept: kept_envs.py)."""

    judge: Judge
    envs: Path
    wheelhouse: Path
    kept_in: Cache | None
    runs: int  # the kept runs the cache holds at most
    came: dict[str, str] = field(default_factory=dict)

    @property
    def requirements(self) -> Path:
        return self.judge.j.parent / "scripts" / "requirements-judge.txt"

    @cached_property
    def keys(self) -> dict[str, str]:
        """Keyed as a base's: the patch's environment is the parent's of a judgment whose base
        it becomes (kept_envs.py)."""
        j = self.judge.j
        pairs = (("parent", j.base), ("patch", j.head))
        return {side: parent_env_key(j.repo, commit, self.requirements) for side, commit in pairs}

    def make_room(self) -> None:
        """Bound the cache before this judgment keeps its own runs and environments (none of
        its own deleted), beside the builds, where a core is idle."""
        assert self.kept_in is not None
        prune(self.kept_in.folder, self.runs)
        evict(self.kept_in, [oracle_env_key(self.requirements), *self.keys.values()])

    def side(self, side: str, tree: Path, donor: Callable[[], Path | None]) -> tuple[Path, str]:
        """The side's python and its build's digest, taken here: the parent's while the
        patch's environment is still being built."""
        build = base_build(tree, self.wheelhouse, self.requirements, donor)
        built = kept_env(self.kept_in, self.keys[side], self.envs / side, build)
        self.came[side] = built.came
        return built.python, build_digest(built.python.parent.parent)

    def oracle(self) -> tuple[Path, Seal]:
        reqs = self.requirements
        return sealed_tools_env(self.envs, self.wheelhouse, reqs, self.kept_in, self.came)


def kept_for(judge: Judge) -> tuple[Path | None, Cache | None, int]:
    """Where this judgment keeps environments and runs for the next ones, the kept
    environments there, and how many runs it keeps: nothing is kept from, or for, a judgment
    whose patch code ran unconfined (or --fresh). Both limits are read before any build: a
    bad value fails closed there."""
    if judge.confinement == "unconfined" or judge.fresh:
        return None, None, 0
    cache = cache_folder(judge.j.repo)
    return cache, Cache(cache, env_limit(), judge.held), runs_limit()


def waited_builds(
    judge: Judge, jobs: Mapping[str, Future[Any]], start: float
) -> dict[str, Any] | None:
    """Each build's result, or None once one failed (recorded as the build step's)."""
    built: dict[str, Any] = {}
    for side, job in jobs.items():  # the oracle's failure first: the patch never started then
        try:
            built[side] = job.result()
        except FailClosed as exc:
            # A patch that does not build is its own fault; a wheelhouse that lacks what a
            # build needs means the gate cannot see, whichever side it is.
            own_fault = side == "patch" and not isinstance(exc, NotInWheelhouse)
            code = BLOCK if own_fault else FAIL_CLOSED
            seconds = time.monotonic() - start
            judge.record("build", code, f"the {side} does not build: {exc}", seconds)
            return None
    return built


def checked_builds(
    judge: Judge,
    built: dict[str, Any],
    seconds: float,
    came: Mapping[str, str],
    *,
    cache: Path | None,
    beside: dict[str, Seal],
) -> Builds | None:
    """The builds once each wheel is found to install its tree (the build step's outcome)."""
    try:
        matched, evidence = built_from_trees(judge.j, built["parent"], built["patch"])
    except FailClosed as exc:
        judge.record("build", FAIL_CLOSED, str(exc), seconds)
        return None
    done_line = f"{built_line('oracle' in built, came)}; {matched}"
    if evidence["same"]:
        done_line += "; the patch's build is the parent's, file for file"
    judge.append(Report("build", STATUS[PASS], PASS, judge.shorten(done_line), evidence), seconds)
    oracle_python, oracle_seal = built.pop("oracle", (None, None))
    return Builds(
        parent=built["parent"][0],
        patch=built["patch"][0],
        oracle=oracle_python,
        oracle_seal=oracle_seal,
        same=evidence["same"],
        parent_build=evidence["parent_build"],
        patch_build=evidence["patch_build"],
        cache=cache,
        beside=beside,
        changed=changed_package(judge.j, evidence, built["patch"][0]),
        functions=reach_of(evidence, built),
    )


def changed_package(
    j: Judgment, evidence: Mapping[str, Any], python: Path
) -> tuple[ChangedFile, ...]:
    """The package files the patch's build installs changed, with their lines of code."""
    sides = (installed(evidence["parent"]), installed(evidence["patch"]))
    site = project_info(python.parent.parent).parent
    return changed_files((j.parent, j.patch), sides, site)


def reach_of(evidence: Mapping[str, Any], built: Mapping[str, Any]) -> ChangedFunctions:
    """The base's functions the patch changed (which parent tests can reach it), from the
    files that differ between the two builds and the wheels' metadata."""
    infos = [project_info(built[side][0].parent.parent) for side in SIDES]
    rows = [{row["path"]: row["sha256"] for row in evidence[side]["files"]} for side in SIDES]
    differ = {p for p in rows[0].keys() | rows[1].keys() if rows[0].get(p) != rows[1].get(p)}

    def read(side: int) -> dict[str, str]:
        found = {
            path: (infos[side].parent / path).read_bytes().decode("utf-8", "replace")
            if path.endswith(".py")
            else rows[side][path]
            for path in differ
            if path in rows[side]
        }
        return {**found, **wheel_metadata(infos[side])}

    return changed_functions(package_modules(infos[0]), read(0), read(1))


SIDES = ("parent", "patch")


def taken_beside(judge: Judge, parent: Future[Any], patch: Future[Any]) -> dict[str, Seal]:
    """What the steps the table marks `beside_build` take once the parent is built and until
    the patch is, where a core idles (the replay's parent-now runs), each sealed. Nothing
    where the step would not read it (a step of the base's own scripts, a shard without it)
    or the parent did not build; what cannot be taken here is the step's to report. One at a
    time: the patch's build has the other core."""
    env = env_of(parent)
    if not judge.inline or env is None:
        return {}
    taken: dict[str, Seal] = {}
    for step in STEPS:
        if not (step.beside_build and step.runs_on(judge.j.shard)):
            continue
        contract: Contract[Any] = importlib.import_module(step.module).STEP
        assert contract.beside_build is not None, f"{step.name}: no beside_build"
        try:
            found = contract.beside_build(judge.j, env, patch.done)
        except FailClosed:
            continue
        file = judge.tmp / f"{step.name}-beside-build.json"
        taken[step.name] = write_sealed(file, json.dumps(found).encode("utf-8"))
    return taken


def env_of(job: Future[Any] | None) -> Path | None:
    """The environment a build job made, once it is done (None: no such job, or it failed).
    Each job gives its python first, then the oracle's seal or a side's digest."""
    if job is None or job.exception() is not None:
        return None
    python: Path = job.result()[0]
    return python.parent.parent


def built_from_trees(
    j: Judgment, parent: tuple[Path, str], patch: tuple[Path, str]
) -> tuple[str, dict[str, Any]]:
    """Build provenance (_gate/runs/provenance.py): each wheel installs its tree, and the patch's
    has the parent's kind of origin; the summary's words and the build step's evidence. Each
    side comes as its python and its build's digest."""
    sides = {}
    for side, tree, (python, _), label in (
        ("parent", j.parent, parent, "base:"),
        ("patch", j.patch, patch, "head:"),
    ):
        sides[side] = provenance(tree, project_info(python.parent.parent), label)
    compare(sides["parent"], sides["patch"], j.patch, "head:")
    evidence: dict[str, Any] = {side: found.evidence() for side, found in sides.items()}
    # Each build's digest keys the runs kept of it (_gate/runs/reuse.py); two equal digests are
    # one build.
    evidence["parent_build"], evidence["patch_build"] = parent[1], patch[1]
    same = sides["parent"].files == sides["patch"].files
    evidence["same"] = same and patch[1] == parent[1]
    return f"patch wheel {summary(sides['patch'], 'head:')}", evidence


def built_line(oracle: bool, came: Mapping[str, str]) -> str:
    """The build step's words for its environments: built fresh, or kept
    (_gate/runs/kept_envs.py)."""
    names = ["parent", "patch", *(["oracle"] if oracle else [])]
    kept = [name for name in names if came.get(name) == KEPT]
    fresh = [name for name in names if name not in kept]
    parts = []
    if fresh:
        many = "s" if len(fresh) > 1 else ""
        where = "fresh offline environments" if many else "a fresh offline environment"
        parts.append(f"{listed(fresh)} built into {where}")
    if kept:
        many = "s" if len(kept) > 1 else ""
        parts.append(
            f"the {listed(kept)} environment{many} kept from an earlier build and checked "
            f"file for file: {REUSED}"
        )
    parts += [
        f"the {name} environment kept in the cache changed since it was built: not used "
        "(delete its folder under envs/ there to keep a new one)"
        for name in names
        if came.get(name) == CHANGED
    ]
    return "; ".join(parts)


def listed(names: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def sealed_tools_env(
    envs: Path, wheelhouse: Path, requirements: Path, cache: Cache | None, came: dict[str, str]
) -> tuple[Path, Seal]:
    """The oracle environment, compiled and sealed (its digest beside it, in envs/) before any
    code of the patch runs: every trusted run checks it against that digest (_gate/core/seal.py).
    Kept between judgments where the cache allows (_gate/runs/kept_envs.py)."""

    def build(dest: Path) -> Path:
        python = tools_env(dest, wheelhouse, requirements)[0]
        write_bytecode(dest)
        return python

    built = kept_env(cache, oracle_env_key(requirements), envs / "oracle", build)
    came["oracle"] = built.came
    return built.python, seal(built.python.parent.parent, envs / "oracle.digest.json", built.sealed)
