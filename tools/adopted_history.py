"""Adopt the gate at a commit of a real project, then judge its next commits as they landed.

    python -m tools.adopted_history SOURCE --start REF [--branch NAME] [--command CMD] [--count N]
        [--commit REV ...] [--case CASE ...] [--fixtures DIR] [--as-of-start] [--work DIR]
        [--wheelhouse DIR] [--json FILE]

SOURCE is a git repository or bundle of a Python project with a console script. It is cloned
into --work (its --branch, for a bundle of several slices; no remote kept), reset to
--start, and adopted there as a user would: `adopt` (tools/adopt.py; with --as-of-start, its
`--as-of` the start commit's date, for a history whose requirements have since broken it), its
branch merged,
the folders of --fixtures copied into fixtures/ and locked (`python scripts/fixtures_lock.py
--write`, committed), one `nox -s case` per --case (`--cwd NAME` runs one in a copy of
fixtures/NAME), the cases committed, `nox -s record`. A CASE is split like a shell: the CLI's
arguments (`--case "--version"` works), or `nox -s case`'s own options, ` -- `, then the
arguments (`--case "--yes --stdin '{}' -- lint -"`: a case that exits 1 on purpose, with
--yes).
Then each first-parent commit after --start (the first --count of them) is cherry-picked
onto the base as a branch, judged with `nox -s judge -- --head BRANCH` from the base's
checkout, and merged into the base whatever the verdict, since upstream merged it. One line
per commit: verdict, seconds the judgment took, then the first step that did not pass; a
summary counts the verdicts. With --commit, only the commits named are judged; the others
land on the base unjudged, in their order, so each judged one still has its upstream parent.
The --json rows also say which patches built as their parent did (`same_build`: their runs
were the parent's, scripts/_gate/runs/reuse.py).

Exit codes: 0 the run completed (whatever the verdicts), 2 the project could not be adopted or
a case could not be added (one line says why).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tools import adopt
from tools.bakery import TEMPLATE

BASE = "base"
# Sessions keep their environments between calls, as a user's `nox -r` does: the judge's
# builds are its own and fresh every time.
NOX = ("nox", "--reuse-existing-virtualenvs")


@dataclass(frozen=True)
class Judged:
    commit: str
    subject: str
    verdict: str
    why: str
    seconds: float = 0.0
    same_build: bool = False  # the patch built as the parent did: its runs were the parent's


def adopted_wheelhouse() -> Path:
    """The adopted projects' own wheelhouse (their backends and dependencies), kept between
    runs beside the judges' one ($ORACLE_WHEELHOUSE, else this checkout's .cache/wheelhouse)."""
    judges = os.environ.get("ORACLE_WHEELHOUSE") or TEMPLATE / ".cache" / "wheelhouse"
    return Path(judges).parent / "wheelhouse-adopted"


def nox(
    repo: Path, wheelhouse: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> None:
    cmd = [*NOX, *args]
    env = {**os.environ, "ORACLE_WHEELHOUSE": str(wheelhouse), **(env or {})}
    if check:
        adopt.run(cmd, repo, " ".join(cmd), env)
    else:  # the verdict is in the report, whatever the exit
        subprocess.run(cmd, cwd=repo, env=env, capture_output=True, check=False)


@dataclass(frozen=True)
class Adoption:
    """How a source is adopted, beyond its cases and fixtures."""

    branch: str | None = None  # of the source to clone (None: its HEAD)
    command: str | None = None  # the console script adopt records (None: adopt finds it)
    as_of_start: bool = False  # pin the judge's tools as of the start commit's date


def prepare(
    source: Path,
    start: str,
    work: Path,
    wheelhouse: Path,
    cases: Sequence[str],
    *,
    fixtures: Path | None = None,
    adoption: Adoption = Adoption(),
) -> tuple[Path, list[str]]:
    """The project at `start` with the gate adopted, merged, and the cases added; and the
    first-parent commits from `start` to the source's HEAD, oldest first."""
    repo = work / "repo"
    work.mkdir(parents=True, exist_ok=True)  # as `git clone` makes its target's parents
    branch, command = adoption.branch, adoption.command
    picked = ["--branch", branch] if branch else []
    adopt.git(work, "clone", "-q", *picked, str(source), str(repo))
    adopt.git(repo, "remote", "remove", "origin")
    commits = adopt.git(repo, "rev-list", "--first-parent", "--reverse", f"{start}..HEAD")
    adopt.git(repo, "checkout", "-q", "-B", BASE, start)
    how = ["--wheelhouse", str(wheelhouse), "--owners", "@org/owners"]
    how += ["--command", command] if command else []
    if adoption.as_of_start:
        how += ["--as-of", adopt.git(repo, "log", "-1", "--format=%cI", start).strip()]
    if adopt.main([str(repo), *how]):
        raise adopt.AdoptError(f"adopting the gate in {source} at {start} failed (see above)")
    adopt.git(repo, "checkout", "-q", BASE)  # adopt leaves its branch checked out
    adopt.git(repo, "merge", "-q", "--ff-only", adopt.BRANCH)
    if fixtures is not None:
        shutil.copytree(fixtures, repo / "fixtures", dirs_exist_ok=True)
        lock = [sys.executable, "scripts/fixtures_lock.py", "--write", "--report", os.devnull]
        adopt.run(lock, repo, "locking the fixtures")
        adopt.git(repo, "add", "fixtures", "fixtures.lock")
        adopt.git(repo, "commit", "-q", "-m", "Add fixtures")
    for line in cases:
        nox(repo, wheelhouse, "-s", "case", "--", *case_arguments(line))
    if cases:  # with none, the judgments replay adopt's own case
        adopt.git(repo, "commit", "-q", "-m", "Add cases", "oracle/cases.yaml")
    nox(repo, wheelhouse, "-s", "record")
    return repo, commits.split()


def case_arguments(line: str) -> list[str]:
    """`nox -s case`'s arguments for one --case: its own options, `--`, the CLI's arguments
    (a CASE without a `--` is the CLI's arguments alone)."""
    words = shlex.split(line)
    return words if "--" in words else ["--", *words]


def applied(repo: Path, commit: str, branch: str) -> bool:
    """Cherry-pick `commit` onto the base as `branch` (a merge by its first parent); False,
    with the base checked out as it was, where it does not apply."""
    adopt.git(repo, "checkout", "-q", "-B", branch, BASE)
    parents = adopt.git(repo, "rev-list", "--parents", "-1", commit).split()
    mainline = ["-m", "1"] if len(parents) > 2 else []
    try:
        adopt.git(repo, "cherry-pick", "--allow-empty", *mainline, commit)
    except adopt.AdoptError:
        subprocess.run(
            ["git", "cherry-pick", "--abort"], cwd=repo, capture_output=True, check=False
        )
        return False
    finally:
        adopt.git(repo, "checkout", "-q", BASE)
    return True


def landed(repo: Path, commit: str) -> None:
    """Merge `commit` into the base unjudged, as upstream landed it."""
    if not applied(repo, commit, "upstream"):
        raise adopt.AdoptError(f"{commit[:12]} does not apply on the adopted base")
    adopt.git(repo, "merge", "-q", "--ff-only", "upstream")


def judge(repo: Path, commit: str, wheelhouse: Path) -> Judged:
    subject = adopt.git(repo, "log", "-1", "--format=%s", commit)
    branch = f"upstream-{commit[:12]}"
    if not applied(repo, commit, branch):
        return Judged(commit, subject, "not-applied", "does not apply on the adopted base")
    path = repo / "reports/judge-report.json"
    path.unlink(missing_ok=True)  # the verdict read below is this judgment's, never the last
    start = time.perf_counter()
    nox(repo, wheelhouse, "-s", "judge", "--", "--head", branch, check=False)
    seconds = time.perf_counter() - start
    if not path.is_file():
        raise adopt.AdoptError(f"the judge of {commit[:12]} left no report (see reports/)")
    report = json.loads(path.read_text("utf-8"))
    failed = [s for s in report["steps"] if s["status"] not in ("pass", "advisory")]
    why = f"{failed[0]['name']}: {failed[0]['summary']}" if failed else ""
    adopt.git(repo, "merge", "-q", "--ff-only", branch)
    build: object = next((s["evidence"] for s in report["steps"] if s["name"] == "build"), {})
    same = isinstance(build, dict) and build.get("same") is True
    return Judged(commit, subject, str(report["verdict"]), why, round(seconds, 1), same)


def run(args: argparse.Namespace) -> list[Judged]:
    repo, commits = prepare(
        args.source.resolve(),
        args.start,
        args.work,
        args.wheelhouse,
        args.case,
        fixtures=args.fixtures,
        adoption=Adoption(args.branch, args.command, args.as_of_start),
    )
    picked = {adopt.git(repo, "rev-parse", f"{rev}^{{commit}}") for rev in args.commit}
    rows = []
    for commit in commits[: args.count] if args.count else commits:
        if picked and commit not in picked:
            landed(repo, commit)
            continue
        row = judge(repo, commit, args.wheelhouse)
        line = f"{row.verdict:12} {row.seconds:6.1f} s {commit[:12]} {row.subject[:60]}"
        print(f"{line}  {row.why[:120]}", flush=True)
        rows.append(row)
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path, help="git repository or bundle")
    p.add_argument("--start", required=True, help="commit the gate is adopted at")
    p.add_argument("--branch", help="the source's branch to clone (default: its HEAD)")
    p.add_argument("--command", help="adopt's --command: what the cases run (default: the CLI)")
    p.add_argument("--count", type=int, help="judge only the first N commits after --start")
    p.add_argument(
        "--commit",
        action="append",
        default=[],
        metavar="REV",
        help="judge only this commit (repeat); the others land on the base unjudged",
    )
    p.add_argument("--case", action="append", default=[], help="a case's arguments (repeat)")
    p.add_argument("--fixtures", type=Path, help="folders to add under fixtures/ (for --cwd)")
    p.add_argument(
        "--as-of-start",
        action="store_true",
        help="adopt with the project's requirements as they were at --start's commit date",
    )
    p.add_argument("--work", type=Path, required=True, help="empty folder to work in")
    p.add_argument("--wheelhouse", type=Path, required=True, help="wheelhouse to fill and use")
    p.add_argument("--json", type=Path, help="write every row here")
    return p


def joined(argv: Sequence[str]) -> list[str]:
    """`--case VALUE` as `--case=VALUE`: argparse takes a VALUE that starts with `-` (a case
    of `--version`) for an option of its own."""
    out: list[str] = []
    words = iter(argv)
    for word in words:
        out.append(f"--case={next(words, '')}" if word == "--case" else word)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(joined(sys.argv[1:] if argv is None else argv))
    try:
        rows = run(args)
    except adopt.AdoptError as exc:
        print(f"adopted_history: {exc}", file=sys.stderr)
        return 2
    counts = Counter(row.verdict for row in rows)
    print(", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())))
    if args.json:
        payload: dict[str, Any] = {"counts": counts, "rows": [asdict(row) for row in rows]}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
