"""The change step (the capability diff) on every first-parent commit of the pinned slices of
real projects (tests/data/*.bundle), against its parent: which commits would need a code
owner's review, and what each gains. By hand, no judge:

    python -m tools.capability_survey [tests/data/yamllint-slice.bundle ...]

The package of each commit is every folder at the root or under src/ holding an __init__.py
(tests and docs folders left out), as near to what the wheel installs as a tree alone says.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from tools.bakery import TEMPLATE, git

SCRIPTS = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"
sys.path.insert(0, str(SCRIPTS))

import change  # noqa: E402  (the gate's scripts are on sys.path only now)


def packages(repo: Path, commit: str) -> list[str]:
    found = set()
    for path in git(repo, "ls-tree", "-r", "--name-only", commit).splitlines():
        parts = path.split("/")
        top = len(parts) == 2 or (len(parts) == 3 and parts[0] == "src")
        if top and parts[-1] == "__init__.py" and not parts[-2].startswith(("test", "doc")):
            found.add("/".join(parts[:-1]))
    return sorted(found)


def commits(repo: Path, bundle: Path) -> Iterator[str]:
    """Each first-parent commit of each branch the bundle holds, newest first."""
    for line in git(repo, "bundle", "list-heads", str(bundle)).splitlines():
        ref = line.split()[1]
        local = f"survey/{ref.removeprefix('refs/heads/')}"
        git(repo, "fetch", "-q", str(bundle), f"+{ref}:{local}")
        yield from git(repo, "rev-list", "--first-parent", local).split()[:-1]


def surveyed(repo: Path, commit: str, work: Path) -> dict[str, object] | None:
    package = packages(repo, commit)
    if not package:
        return None
    trees = {}
    for side, ref in (("parent", f"{commit}^"), ("patch", commit)):
        trees[side] = work / side
        subprocess.run(["rm", "-rf", str(trees[side])], check=True)
        trees[side].mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", ref, "--", *package], cwd=repo, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(trees[side])], input=archive.stdout, check=True)
    report = work / "change.json"
    flags = ["--parent-tree", str(trees["parent"]), "--patch-tree", str(trees["patch"])]
    change.main([*flags, "--package", *package, "--report", str(report)])
    data: dict[str, object] = json.loads(report.read_text("utf-8"))
    return data


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundles", nargs="*", type=Path, help="default: every tests/data/*.bundle")
    args = p.parse_args(argv)
    bundles = args.bundles or sorted((TEMPLATE / "tests" / "data").glob("*.bundle"))
    review = 0
    with tempfile.TemporaryDirectory(prefix="survey-") as name:
        work = Path(name)
        for bundle in bundles:
            repo = work / bundle.stem
            git(work, "init", "-q", str(repo))
            for commit in commits(repo, bundle):
                data = surveyed(repo, commit, work / "trees")
                if data is None:
                    continue
                evidence = data["evidence"]
                assert isinstance(evidence, dict)
                review += data["status"] == "needs-review"
                subject = git(repo, "log", "-1", "--format=%s", commit)[:60]
                print(f"{bundle.stem} {commit[:8]} {data['status']}: {subject}")
                for row in evidence["capabilities"]:
                    print(f"    {row['capability']} {row['path']}:{row['line']} {row['function']}")
    print(f"{review} commit(s) need a capability review")
    return 0


if __name__ == "__main__":
    sys.exit(main())
