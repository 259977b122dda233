"""Adopt the gate at a commit of a real project, then judge its next commits as they landed.

    python -m tools.adopted_history SOURCE --start REF [--count N] [--case ARGS ...]
        [--work DIR] [--wheelhouse DIR] [--json FILE]

SOURCE is a git repository or bundle of a Python project with a console script. It is cloned
into --work (no remote kept), reset to --start, and adopted there as a user would: `adopt`
(tools/adopt.py), its branch merged, one `nox -s case -- -- ARGS` per --case (split like a
shell), the cases committed, `nox -s record`. Then each first-parent commit after --start (the
first --count of them) is cherry-picked onto the base as a branch, judged with
`nox -s judge -- --head BRANCH` from the base's checkout, and merged into the base whatever
the verdict, since upstream merged it. One line per commit: verdict, then the first step that
did not pass; a summary counts the verdicts.

Exit codes: 0 the run completed (whatever the verdicts), 2 the project could not be adopted or
a case could not be added (one line says why).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tools import adopt

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


def sh(
    repo: Path, *cmd: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), cwd=repo, env=env, capture_output=True, text=True, check=False)


def must(proc: subprocess.CompletedProcess[str], what: str) -> str:
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise adopt.AdoptError(f"{what} failed: {lines[-1] if lines else proc.returncode}")
    return proc.stdout.strip()


def prepare(
    source: Path, start: str, work: Path, wheelhouse: Path, cases: Sequence[str]
) -> tuple[Path, list[str]]:
    """The project at `start` with the gate adopted, merged, and the cases added; and the
    first-parent commits from `start` to the source's HEAD, oldest first."""
    repo = work / "repo"
    must(sh(work, "git", "clone", "-q", str(source), str(repo)), "git clone")
    must(sh(repo, "git", "remote", "remove", "origin"), "git remote remove")
    span = f"{start}..HEAD"
    commits = must(sh(repo, "git", "rev-list", "--first-parent", "--reverse", span), "rev-list")
    must(sh(repo, "git", "checkout", "-q", "-B", BASE, start), "git checkout")
    if adopt.main([str(repo), "--wheelhouse", str(wheelhouse), "--owners", "@org/owners"]):
        raise adopt.AdoptError(f"adopting the gate in {source} at {start} failed (see above)")
    must(sh(repo, "git", "checkout", "-q", BASE), "git checkout")  # adopt leaves its branch out
    must(sh(repo, "git", "merge", "-q", "--ff-only", adopt.BRANCH), "git merge")
    env = nox_env(wheelhouse)
    for line in cases:
        argv = shlex.split(line)
        must(sh(repo, *NOX, "-s", "case", "--", "--", *argv, env=env), f"case {line}")
    must(sh(repo, "git", "commit", "-q", "-m", "Add cases", "oracle/cases.yaml"), "git commit")
    must(sh(repo, *NOX, "-s", "record", env=env), "nox -s record")
    return repo, commits.split()


def nox_env(wheelhouse: Path) -> dict[str, str]:
    return {**os.environ, "ORACLE_WHEELHOUSE": str(wheelhouse)}


def judge(repo: Path, commit: str, wheelhouse: Path) -> Judged:
    subject = must(sh(repo, "git", "log", "-1", "--format=%s", commit), "git log")
    branch = f"upstream-{commit[:12]}"
    must(sh(repo, "git", "checkout", "-q", "-b", branch, BASE), "git checkout")
    parents = must(sh(repo, "git", "rev-list", "--parents", "-1", commit), "git rev-list").split()
    mainline = ["-m", "1"] if len(parents) > 2 else []
    picked = sh(repo, "git", "cherry-pick", "--allow-empty", *mainline, commit)
    if picked.returncode != 0:
        sh(repo, "git", "cherry-pick", "--abort")
        must(sh(repo, "git", "checkout", "-q", BASE), "git checkout")
        return Judged(commit, subject, "not-applied", "does not apply on the adopted base")
    must(sh(repo, "git", "checkout", "-q", BASE), "git checkout")
    sh(repo, *NOX, "-s", "judge", "--", "--head", branch, env=nox_env(wheelhouse))
    report = json.loads((repo / "reports/judge-report.json").read_text("utf-8"))
    failed = [s for s in report["steps"] if s["status"] not in ("pass", "advisory")]
    why = f"{failed[0]['name']}: {failed[0]['summary']}" if failed else ""
    must(sh(repo, "git", "merge", "-q", "--ff-only", branch), "git merge")
    return Judged(commit, subject, str(report["verdict"]), why)


def run(args: argparse.Namespace) -> list[Judged]:
    repo, commits = prepare(
        args.source.resolve(), args.start, args.work, args.wheelhouse, args.case
    )
    rows = []
    for commit in commits[: args.count] if args.count else commits:
        row = judge(repo, commit, args.wheelhouse)
        print(f"{row.verdict:12} {commit[:12]} {row.subject[:60]}  {row.why[:120]}", flush=True)
        rows.append(row)
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path, help="git repository or bundle")
    p.add_argument("--start", required=True, help="commit the gate is adopted at")
    p.add_argument("--count", type=int, help="judge only the first N commits after --start")
    p.add_argument("--case", action="append", default=[], help="a case's arguments (repeat)")
    p.add_argument("--work", type=Path, required=True, help="empty folder to work in")
    p.add_argument("--wheelhouse", type=Path, required=True, help="wheelhouse to fill and use")
    p.add_argument("--json", type=Path, help="write every row here")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
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
