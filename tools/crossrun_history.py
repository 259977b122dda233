"""The crossrun over a real project's history: which commits would the parent's tests block?

    python -m tools.crossrun_history REPO --head REF [--commits N] [--package DIR]
        [--tests DIR ...] [--json FILE]

For each of the last N first-parent commits of REF that change the package (`--package`),
parent and commit are checked out as worktrees, each installed with pytest into its own
virtual environment by uv (from the package index: a measurement, not the judge, which installs
only from its wheelhouse), and judged by scripts/crossrun.py: the parent's tests on the parent
build and on the commit's build. One line per commit; the JSON report holds every summary.
Exit codes: 0 the run completed (whatever the verdicts), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tools.bakery import TEMPLATE, git

sys.path.insert(0, str(TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"))
import crossrun


class Builds:
    """One worktree and one environment per commit, made once."""

    def __init__(self, repo: Path, scratch: Path) -> None:
        self.repo, self.scratch = repo, scratch
        self.made: dict[str, tuple[Path, Path]] = {}

    def __call__(self, sha: str) -> tuple[Path, Path]:
        if sha not in self.made:
            tree, venv = self.scratch / sha[:12], self.scratch / f"{sha[:12]}-env"
            git(self.repo, "worktree", "add", "-f", "-q", "--detach", str(tree), sha)
            subprocess.run(["uv", "venv", "-q", str(venv)], check=True)
            python = venv / "bin" / "python"
            install = ["uv", "pip", "install", "-q", "--python", str(python), str(tree), "pytest"]
            subprocess.run(install, check=True, capture_output=True)
            self.made[sha] = (tree, python)
        return self.made[sha]

    def remove(self) -> None:
        for tree, _python in self.made.values():
            git(self.repo, "worktree", "remove", "--force", str(tree))


def judge(builds: Builds, sha: str, tests: Sequence[str], scratch: Path) -> dict[str, str]:
    parent = git(builds.repo, "rev-parse", f"{sha}^").strip()
    (tree, before), (_, after) = builds(parent), builds(sha)
    report = scratch / f"{sha[:12]}.json"
    argv = ["--tree", str(tree), "--tests", *tests, "--report", str(report)]
    crossrun.main([*argv, "--parent-python", str(before), "--patch-python", str(after)])
    data = json.loads(report.read_text("utf-8"))
    subject = git(builds.repo, "log", "-1", "--format=%s", sha).strip()
    return {"commit": sha, "status": data["status"], "summary": data["summary"], "subject": subject}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("repo", type=Path)
    p.add_argument("--head", required=True, help="the last commit judged")
    p.add_argument("--commits", type=int, default=20, help="commits that change the package")
    p.add_argument("--package", required=True, help="the package folder, e.g. sqlparse")
    p.add_argument("--tests", nargs="+", default=["tests"])
    p.add_argument("--json", type=Path, default=Path("reports/crossrun-history.json"))
    args = p.parse_args(argv)
    try:
        commits = git(args.repo, "rev-list", "--first-parent", args.head).split()
    except (RuntimeError, OSError) as exc:  # not a repository, no such folder
        print(f"crossrun-history: {args.repo}: {exc}", file=sys.stderr)
        return 2
    changing = [
        c
        for c in commits[: args.commits * 5]
        if git(args.repo, "diff", "--name-only", f"{c}^", c, "--", args.package).strip()
    ][: args.commits]
    rows = []
    with tempfile.TemporaryDirectory(prefix="crossrun-history-") as name:
        builds = Builds(args.repo, Path(name))
        try:
            for sha in changing:
                row = judge(builds, sha, args.tests, Path(name))
                rows.append(row)
                print(f"{sha[:10]} {row['status']:<10} {row['subject'][:50]} | {row['summary']}")
        finally:
            builds.remove()
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("pass", "deferred", "block")}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"counts": counts, "commits": rows}, indent=2), "utf-8")
    print(f"crossrun-history: {len(rows)} commits: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
