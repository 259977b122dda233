"""Assert inventory of what is staged: HEAD's tests against the index's, before a commit.

    python scripts/staged_inventory.py [--repo .] [--config oracle/judge.yaml]

The pre-commit hook of the assert inventory (.pre-commit-config.yaml): a deleted test, fewer
assertions, a skip or a vacuous assert shows up when it is committed, not when the judge runs.
HEAD and the index are exported into temporary trees and scripts/count_asserts.py compares
them by AST, with judge.yaml's tests and assert helpers, the allowlist, and git's rename
detection between HEAD and the index's tree. It builds nothing, so pytest's collection is left
to the judge. A repository without a commit yet has nothing to compare and passes.
Exit codes: those of count_asserts.py: 0 nothing lost, 1 block, 2 fail closed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from _gate.core.protocol import EXIT_CODES_HELP, FAIL_CLOSED, PASS, STATUS, FailClosed, say
from _gate.runs.git import git, repo_root, rev_exists


def export(repo: Path, tree: str, dest: Path, index: Path) -> Path:
    """Check `tree` out into `dest` through a private index: the user's index is untouched."""
    env = {"GIT_INDEX_FILE": str(index)}
    git(repo, "read-tree", tree, env=env)
    git(repo, "checkout-index", "--all", f"--prefix={dest}/", env=env)
    return dest


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--repo", type=Path, default=Path("."))
    p.add_argument("--config", type=Path, default=Path("oracle/judge.yaml"))
    p.add_argument("--allowlist", type=Path, default=Path("oracle/allowlist.yaml"))
    p.add_argument("--report", type=Path, default=Path("reports/assert-inventory-staged.json"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oracle-staged-") as name:
        try:
            trees = staged_trees(args.repo, Path(name))
        except FailClosed as exc:
            say(f"assert-inventory: {STATUS[FAIL_CLOSED]}: {exc}", error=True)
            return FAIL_CLOSED
        if trees is None:
            say("assert-inventory: pass: no commit yet, nothing to compare")
            return PASS
        parent, patch, index = trees
        # The step's own script, as a process: entry scripts never import each other.
        inventory = Path(__file__).with_name("count_asserts.py")
        return subprocess.run(
            [
                *(sys.executable, str(inventory)),
                *("--parent", str(parent), "--patch", str(patch), "--repo", str(args.repo)),
                *("--base", "HEAD", "--head", index, "--config", str(args.config)),
                *("--allowlist", str(args.allowlist), "--report", str(args.report)),
            ],
            check=False,
        ).returncode


def staged_trees(repo: Path, tmp: Path) -> tuple[Path, Path, str] | None:
    """HEAD's tree, the index's tree, and the index's tree id; None before the first commit."""
    repo_root(repo)
    if not rev_exists(repo, "HEAD"):
        return None
    # The staged tree as an object, so git's rename detection sees what is staged.
    index = git(repo, "write-tree").strip()
    parent = export(repo, "HEAD", tmp / "head", tmp / "head.index")
    return parent, export(repo, index, tmp / "staged", tmp / "staged.index"), index


if __name__ == "__main__":
    sys.exit(main())
