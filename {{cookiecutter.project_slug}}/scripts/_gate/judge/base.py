"""What the judge checks of the base before it judges: that it holds the gate, the commit judged
against, the oracle ref's files, and whether the patch's code can run confined here."""

from __future__ import annotations

import tempfile
from pathlib import Path

from _gate.core.context import OracleRef
from _gate.core.protocol import FAIL_CLOSED, FailClosed
from _gate.core.steps import SCRIPTS
from _gate.judge.lanes import Judge
from _gate.plugin.confine import SHM
from _gate.runs.git import (
    SCORE_FILE,
    base_ref,
    committed_config,
    default_base,
    git,
    resolve_commit,
    resolve_oracle_ref,
    uncommitted,
)
from _gate.runs.reuse import CACHE_ENV, cache_folder, code_files
from _gate.runs.sandbox import Sandbox, probe_sandbox, unconfinable

# What a base must hold for the judge to run on it: its settings and the scripts it runs.
GATE_FILES = (
    "oracle/judge.yaml",
    "scripts/requirements-judge.txt",
    *(f"scripts/{script}" for script in SCRIPTS),
)
# What the gate reads, all from committed revisions: edits in the working tree are named.
GATE_PATHS = ("oracle", "oracles", "fixtures", "fixtures.lock", "scripts", "noxfile.py")


def oracle_ref(judge: Judge, repo: Path, ref: str, dest: Path) -> OracleRef:
    """The oracle ref's files as they stand on the protected ref, never on the branch (empty
    when the ref has none of that name)."""
    try:
        full = resolve_oracle_ref(repo, ref)
    except FailClosed as exc:  # the steps that read it fail closed on it
        return OracleRef(unreadable=str(exc))
    shown = full.removeprefix("refs/remotes/").removeprefix("refs/heads/")
    paths = []
    for name in ("quarantine.yaml", "variance-ledger.json", SCORE_FILE):
        path = dest / name
        path.write_text(git(repo, "show", f"{full}:{name}", check=False), "utf-8")
        judge.name(path, f"{shown}:{name}")  # reports name them as git does
        paths.append(path)
    quarantine, ledger, strength = paths
    return OracleRef(quarantine, ledger, strength)


def out_of_reach(repo: Path) -> str:
    """Why a confined job would not find the judge's folders ("": it would): its temporary
    folder and its cache hold what the jobs run and write, and a job gets an empty /dev/shm of
    its own (_gate/plugin/confine.py): the patch's build would fail there as if it did not build."""
    for name, folder in (
        ("$TMPDIR", Path(tempfile.gettempdir())),
        (f"${CACHE_ENV}", cache_folder(repo)),
    ):
        if folder.resolve().is_relative_to(SHM):
            return (
                f"{name}: {folder} is under {SHM}, which every confined job gets empty, of its "
                f"own; set {name} to a folder outside {SHM}"
            )
    return ""


def confinable(run: Judge) -> bool:
    """Whether the patch's code may run here: confined, or unconfined where judge.yaml says
    `sandbox: best-effort` (and every report then says so)."""
    found = probe_sandbox()
    run.confinement = found.level if found.level != "none" else "unconfined"
    if found.level == "none" and Sandbox.required:
        run.record("build", FAIL_CLOSED, unconfinable(found.missing))
        return False
    # Only jobs in namespaces get mounts of their own, /dev/shm among them.
    hidden = out_of_reach(run.repo) if found.level == "namespaces" else ""
    if hidden:
        run.record("build", FAIL_CLOSED, hidden)
    return not hidden


def base_commit(repo: Path, base: str | None, head: str, head_sha: str) -> str:
    """The commit judged against: --base, else the merge base of the head and the base branch;
    either must hold the gate."""
    if base:
        sha = resolve_commit(repo, base, "--base")
        require_gate(repo, sha, f"{base} ({sha[:12]})", "pass --base REF of a commit that has it")
        return sha
    # Only the base branch's name comes from this checkout (as HEAD commits it); all else from
    # the base tree.
    branch = committed_config(repo).base_branch
    target = base_ref(repo, branch)
    sha, tip = default_base(repo, head_sha, branch), resolve_commit(repo, target, "base branch")
    if sha == tip:
        label = f"{target} ({sha[:12]})"
    else:
        label = f"{sha[:12]} (the merge base of {head} and {target})"
    if gate_missing(repo, tip):
        fix = f"merge the branch that adds it into {branch} first"
    else:
        fix = f"{target} has it: merge {target} into {head}"
    require_gate(repo, sha, label, f"{fix}, or pass --base REF of a commit that has it")
    return sha


def note_uncommitted(repo: Path) -> None:
    """Name the gate files edited but not committed here: a user who edits oracle/cases.yaml and
    judges would otherwise wonder why the new case did nothing."""
    edited = uncommitted(repo, GATE_PATHS)
    if edited:
        more = f" and {len(edited) - 3} more" if len(edited) > 3 else ""
        print(
            f"judge: note: not judged, uncommitted here: {', '.join(edited[:3])}{more}; the gate "
            "reads committed revisions (commit them on the base branch to use them)",
            flush=True,
        )


def require_gate(repo: Path, sha: str, label: str, fix: str) -> None:
    """Fail closed in one line when the base has no gate yet (a project adopting it, whose base
    branch does not hold it): the judge runs the base's settings and scripts, never its own."""
    missing = gate_missing(repo, sha)
    if missing:
        raise FailClosed(f"base {label} has no oracle gate yet ({missing} missing): {fix}")


def gate_missing(repo: Path, sha: str) -> str:
    """Which of GATE_FILES the commit lacks, in a few words; '' when it holds them all."""
    listed = git(repo, "ls-tree", "-r", "-z", "--name-only", sha, "--", *GATE_FILES)
    present = set(listed.split("\0"))
    missing = [path for path in GATE_FILES if path not in present]
    scripts = [path for path in GATE_FILES if path.startswith("scripts/")]
    lost = [path for path in missing if path in scripts]
    words = [path for path in missing if path not in scripts]
    if lost == scripts:
        words.append("scripts/")
    elif lost:
        words.append(lost[0] + (f" and {len(lost) - 1} more scripts" if len(lost) > 1 else ""))
    return " and ".join(words)


def same_files(one: Path, other: Path) -> bool:
    """Whether two scripts/ folders hold the same code (reuse.code_files: the scripts, every
    module of _gate, the pins), byte for byte; False when either cannot be read (the steps then
    run as processes, and say what is wrong)."""

    def files(folder: Path) -> dict[str, bytes]:
        paths = code_files(folder)
        return {path.relative_to(folder).as_posix(): path.read_bytes() for path in paths}

    try:
        return files(one) == files(other)
    except OSError:
        return False
