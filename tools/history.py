"""The assert inventory over a real project's history: which honest commits would it block?

    python -m tools.history REPO --range A..B [--first-parent] [--tests DIR ...]
        [--json FILE] [--workers N] [--script PATH]

REPO is any git repository (a bare mirror is fine). For each commit C of the range (first
parents only with --first-parent, otherwise every commit but merges) whose diff against C^
touches a `.py` file under a test folder, the Python files (a test class's base may live in
the package) and the pytest configuration files of C^ and C are exported with `git archive`
into temporary trees and judged by scripts/count_asserts.py in AST mode (no `--collect-only`:
building every commit of a foreign project is out of scope), with `--repo REPO --base C^
--head C` so git's rename detection applies, and a generated judge.yaml whose `tests:` names the
project's folders. One line per judged commit (verdict, then the first finding), a summary, and
a JSON report with every finding of every commit.

Exit codes: 0 the run completed (whatever the verdicts), 2 bad input (not a repository, an
empty range). The verdicts are the point of the run, not its status.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Not tools.bakery's TEMPLATE: importing it imports cookiecutter, which the harness does not need.
TEMPLATE = Path(__file__).resolve().parent.parent
SCRIPT = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts" / "count_asserts.py"
# Files whose pytest collection settings count_asserts.py compares between the two trees.
CONFIG_FILES = ("pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
VERDICTS = {0: "merge", 1: "block", 2: "error"}  # the inventory never needs a review
# A foreign project's judge.yaml: only `tests:` matters to the inventory; the other required
# fields are there because load_config refuses a file without them.
JUDGE_YAML = """\
command: project
base_branch: main
oracle_ref: oracle/main
protected: []
tests: {tests}
assert_helpers: []
"""
STEP_TIMEOUT = 600  # seconds for one commit's inventory: a hang is reported, never waited out


class HistoryError(Exception):
    """Bad input: one line, exit 2."""


@dataclass
class Verdict:
    commit: str
    parent: str
    subject: str
    exit_code: int
    verdict: str
    summary: str
    findings: list[dict[str, Any]] = field(default_factory=list)


def git(repo: Path, *args: str) -> bytes:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, env=env, check=False
    )
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise HistoryError(f"git {' '.join(args)}: {detail[-1] if detail else 'failed'}")
    return proc.stdout


def commits(repo: Path, span: str, first_parent: bool) -> list[tuple[str, str, str]]:
    """(commit, first parent, subject), oldest first; a root commit has nothing to compare."""
    args = ["log", "--reverse", "--format=%H%x00%P%x00%s%x00"]
    args += ["--first-parent"] if first_parent else ["--no-merges"]
    fields = git(repo, *args, span, "--").decode("utf-8", "replace").split("\0")
    out = []
    for i in range(0, len(fields) - 2, 3):
        sha, parents, subject = fields[i].strip(), fields[i + 1].split(), fields[i + 2]
        if parents:
            out.append((sha, parents[0], subject))
    return out


def touches_tests(repo: Path, parent: str, commit: str, folders: Sequence[str]) -> bool:
    names = git(repo, "diff", "--no-renames", "-z", "--name-only", parent, commit, "--", *folders)
    return any(name.endswith(b".py") for name in names.split(b"\0"))


def export(repo: Path, commit: str, dest: Path) -> None:
    """One commit's Python files (the suite, conftest.py files, the base classes of test
    classes wherever they live) and its pytest configuration files, as a plain tree (no
    checkout, no index); data files of the suite are not needed."""
    dest.mkdir(parents=True)
    listed = git(repo, "ls-tree", "-r", "-z", "--name-only", commit)
    names = [n for n in listed.decode("utf-8", "surrogateescape").split("\0") if n]
    top = git(repo, "ls-tree", "-z", "--name-only", commit, "--", *CONFIG_FILES)
    wanted = [n for n in names if n.endswith(".py")]
    wanted += [n for n in top.decode("utf-8", "surrogateescape").split("\0") if n]
    if not wanted:
        return
    data = git(repo, "archive", "--format=tar", commit, "--", *(f":(literal){n}" for n in wanted))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        # "data" refuses absolute paths, links out of the tree and device files in the archive.
        tar.extractall(dest, filter="data")


def judge(
    repo: Path,
    item: tuple[str, str, str],
    config: Path,
    script: Path,
    python: str,
    *,
    slots: queue.Queue[Path],
) -> Verdict:
    sha, parent, subject = item
    # One scratch folder (and one inventory cache) per worker slot: the cache keys inventories
    # by blob id, so the unchanged files of consecutive commits are read once per slot.
    slot = slots.get()
    try:
        with tempfile.TemporaryDirectory(dir=slot) as tmp:
            work = Path(tmp)
            export(repo, parent, work / "parent")
            export(repo, sha, work / "patch")
            report = work / "report.json"
            cmd = [python, str(script), "--parent", str(work / "parent")]
            cmd += ["--patch", str(work / "patch"), "--repo", str(repo)]
            cmd += ["--base", parent, "--head", sha, "--config", str(config)]
            cmd += ["--cache", str(slot / "inventory-cache.json"), "--report", str(report)]
            try:
                proc = subprocess.run(
                    cmd, capture_output=True, timeout=STEP_TIMEOUT, cwd=work, check=False
                )
            except subprocess.TimeoutExpired:
                return Verdict(sha, parent, subject, 2, "error", "timed out")
            stderr = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            if not report.is_file():
                last = stderr[-1] if stderr else f"exit {proc.returncode}, no report"
                return Verdict(sha, parent, subject, 2, "error", last)
            try:
                payload = json.loads(report.read_bytes())
            except ValueError:
                return Verdict(sha, parent, subject, 2, "error", "unreadable report")
    finally:
        slots.put(slot)
    code = proc.returncode
    evidence = payload.get("evidence") or {}
    return Verdict(
        sha,
        parent,
        subject,
        code,
        VERDICTS.get(code, f"exit {code}"),
        str(payload.get("summary", "")),
        list(evidence.get("findings") or []),
    )


def line(v: Verdict) -> str:
    head = f"{v.commit[:10]} {v.verdict:<11}"
    if v.findings:
        f = v.findings[0]
        more = f" (+{len(v.findings) - 1})" if len(v.findings) > 1 else ""
        where = f"{f.get('path', '?')}:{f.get('line', '?')}"
        detail = f"{f.get('rule', '?')} {where} {f.get('reason', '')}{more}"
    elif v.exit_code != 0:
        detail = v.summary
    else:
        detail = ""
    return f"{head} {detail:<100.100} | {v.subject[:60]}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    repo: Path = args.repo.resolve()
    git(repo, "rev-parse", "--git-dir")
    items = commits(repo, args.range, args.first_parent)
    if not items:
        raise HistoryError(f"{args.range}: no commit with a parent in this range")
    touched = [it for it in items if touches_tests(repo, it[1], it[0], args.tests)]
    with tempfile.TemporaryDirectory(prefix="history-") as tmp:
        root = Path(tmp)
        config = root / "judge.yaml"
        config.write_text(JUDGE_YAML.format(tests=json.dumps(list(args.tests))), "utf-8")
        slots: queue.Queue[Path] = queue.Queue()
        for n in range(args.workers):
            (root / f"slot{n}").mkdir()
            slots.put(root / f"slot{n}")
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            jobs = [
                pool.submit(judge, repo, it, config, args.script, args.python, slots=slots)
                for it in touched
            ]
            verdicts = []
            for job in jobs:  # in history order, each as soon as it and its elders are done
                verdicts.append(job.result())
                print(line(verdicts[-1]), flush=True)
    blocked = [v for v in verdicts if v.exit_code == 1]
    failed = [v for v in verdicts if v.exit_code not in (0, 1)]
    summary = {
        "repo": str(repo),
        "range": args.range,
        "first_parent": args.first_parent,
        "tests": list(args.tests),
        "script": str(args.script),
        "commits": len(items),
        "test_touching": len(touched),
        "merged": len(verdicts) - len(blocked) - len(failed),
        "blocked": [v.commit for v in blocked],
        "failed_closed": [v.commit for v in failed],
    }
    print(
        f"history: {repo} {args.range}{' first-parent' if args.first_parent else ''}: "
        f"{summary['commits']} commits, {summary['test_touching']} touch tests, "
        f"{summary['merged']} merge, {len(blocked)} block, {len(failed)} fail closed"
    )
    for v in blocked + failed:
        print(f"  {v.verdict}: {v.commit[:10]} {v.subject[:70]}")
    return {"summary": summary, "commits": [asdict(v) for v in verdicts]}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("repo", type=Path, help="git repository (a bare mirror is fine)")
    p.add_argument("--range", required=True, help="revision range, e.g. HEAD~200..HEAD")
    p.add_argument("--first-parent", action="store_true", help="follow first parents only")
    p.add_argument("--tests", nargs="+", default=["tests"], help="the project's test folders")
    p.add_argument("--json", type=Path, default=Path("reports/history.json"), help="JSON report")
    p.add_argument("--workers", type=int, default=1, help="commits judged at once (default 1)")
    p.add_argument("--script", type=Path, default=SCRIPT, help="count_asserts.py to run")
    p.add_argument("--python", default=sys.executable, help="interpreter (needs PyYAML)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    cores = os.cpu_count() or 1
    if not 1 <= args.workers <= cores:
        print(f"history: --workers must be 1 to {cores}", file=sys.stderr)
        return 2
    try:
        report = run(args)
    except HistoryError as exc:
        print(f"history: {exc}", file=sys.stderr)
        return 2
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
