"""Judge a patch: every step of the gate, in order, each in its own process.

    python scripts/judge.py [--base REF] [--head REF]      # usually: nox -s judge -- ...

The parent (--base, default the merge base of --head and the base branch, or of
origin/<base_branch> when it exists) and the patch (--head, default HEAD) are each materialized
in their own detached worktree. The step scripts, oracle/, oracles/, fixtures.lock and the
allowlist are all taken from the parent's worktree, never from the patch: a patch that edits
the judge does not change how it is judged. Start the judge from a trusted checkout of the
base branch; running it inside the patch's own worktree trusts that worktree's noxfile.

Steps: preconditions, write-set, fixtures-lock, build, record, replay, assert-inventory,
oracle, quarantine, flake-budget, tests (advisory). Writes reports/judge-report.json and
reports/judge-summary.md (appended to $GITHUB_STEP_SUMMARY when set).
Exit codes: 0 merge, 1 block, 2 fail closed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _gate import (
    BLOCK,
    FAIL_CLOSED,
    PASS,
    STATUS,
    WHEELHOUSE,
    Config,
    FailClosed,
    add_worktree,
    bin_dir,
    build_env,
    default_base,
    git,
    load_config,
    remove_worktree,
    repo_root,
    resolve_commit,
    resolve_oracle_ref,
    write_json,
)

VERDICT = {PASS: "merge", BLOCK: "block", FAIL_CLOSED: "fail-closed"}
CODE = {"pass": PASS, "advisory": PASS, "block": BLOCK, "fail-closed": FAIL_CLOSED}
EVIDENCE_LIMIT = 4000  # characters of one evidence value copied into the judge report


@dataclass
class Judgment:
    """The run's state: where things are, and the steps so far."""

    repo: Path
    reports: Path
    base: str
    head: str
    parent: Path
    patch: Path
    config: Config
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def scripts(self) -> Path:
        return self.parent / "scripts"

    def record(
        self, name: str, code: int, summary: str, evidence: dict[str, Any] | None = None
    ) -> int:
        return self.add(name, STATUS[code], summary, evidence or {})

    def add(self, name: str, status: str, summary: str, evidence: dict[str, Any]) -> int:
        summary = self.shorten(summary)
        self.steps.append(
            {"name": name, "status": status, "summary": summary, "evidence": evidence}
        )
        print(f"judge: {name}: {status}: {summary}", flush=True)
        return CODE[status]

    def shorten(self, text: str) -> str:
        """Name files the way git does (base:path, head:path), not by temporary worktree."""
        return text.replace(f"{self.parent}/", "base:").replace(f"{self.patch}/", "head:")

    def run(self, name: str, script: str, *args: str | Path, advisory: bool = False) -> int:
        """Run one step script of the base tree; its JSON report is the step's only output."""
        report = self.reports / f"{name}.json"
        report.unlink(missing_ok=True)
        cmd = [sys.executable, str(self.scripts / script), *map(str, args), "--report", str(report)]
        proc = subprocess.run(cmd, cwd=self.repo, capture_output=True, check=False)
        try:
            data = json.loads(report.read_bytes())
        except (OSError, ValueError):
            tail = proc.stderr.decode("utf-8", "backslashreplace").strip().splitlines()
            why = tail[-1] if tail else f"exit {proc.returncode}"
            return self.record(name, FAIL_CLOSED, f"step left no report ({why})")
        evidence: dict[str, Any] = {"report": str(report)}
        for key, value in (data.get("evidence") or {}).items():
            if len(json.dumps(value, default=str)) <= EVIDENCE_LIMIT:
                evidence[key] = value
        status = str(data.get("status"))
        status = "advisory" if advisory else status if status in CODE else "fail-closed"
        return self.add(name, status, str(data.get("summary", "")), evidence)


def build_both(j: Judgment, envs: Path, wheelhouse: Path) -> tuple[Path, Path] | None:
    requirements = j.parent / "scripts" / "requirements-judge.txt"
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = {
            side: pool.submit(build_env, tree, envs / side, wheelhouse, requirements)
            for side, tree in (("parent", j.parent), ("patch", j.patch))
        }
    outcomes: dict[str, Path | str] = {}
    for side, job in jobs.items():
        try:
            outcomes[side] = job.result()
        except FailClosed as exc:
            outcomes[side] = str(exc)
    parent, patch = outcomes["parent"], outcomes["patch"]
    if isinstance(parent, str):
        j.record("build", FAIL_CLOSED, f"the base does not build: {parent}")
        return None
    if isinstance(patch, str):
        j.record("build", BLOCK, f"the patch does not build: {patch}")
        return None
    j.record("build", PASS, "parent and patch built into fresh offline environments")
    return parent, patch


def oracle_ref_files(j: Judgment, dest: Path) -> tuple[Path, Path]:
    ref = resolve_oracle_ref(j.repo, j.config.oracle_ref)
    files = []
    for name in ("quarantine.yaml", "variance-ledger.json"):
        path = dest / name
        path.write_text(git(j.repo, "show", f"{ref}:{name}", check=False), "utf-8")
        files.append(path)
    return files[0], files[1]


def gate(j: Judgment, tmp: Path, wheelhouse: Path) -> None:
    """The steps in their fixed order; a step that cannot give evidence stops what depends on it."""
    review = os.environ.get("ORACLE_REVIEW") == "1"
    evidence_tree = j.patch if review else j.parent  # reviewed oracle edits take effect
    config = j.parent / "oracle" / "judge.yaml"
    if j.run("preconditions", "check_preconditions.py", "--tree", j.parent) != PASS:
        return
    j.run(
        "write-set",
        "classify_write_set.py",
        "--repo",
        j.repo,
        "--base",
        j.base,
        "--head",
        j.head,
        "--config",
        config,
    )
    j.run(
        "fixtures-lock",
        "lock_fixtures.py",
        "--check",
        "--root",
        j.patch,
        "--lock",
        evidence_tree / "fixtures.lock",
    )
    built = build_both(j, tmp / "envs", wheelhouse)
    if built is None:
        return
    parent_py, patch_py = built
    command = j.config.command
    parent_cmd, patch_cmd = (
        bin_dir(parent_py.parent.parent) / command,
        bin_dir(patch_py.parent.parent) / command,
    )
    cassette = j.repo / ".oracle" / "cassettes" / j.base / "cassettes.json"
    cases = (
        "--cases",
        j.parent / "oracle" / "cases.yaml",
        "--fixtures",
        j.parent / "fixtures",
        "--timeout",
        str(j.config.case_timeout),
    )
    if (
        j.run(
            "record",
            "record_cassettes.py",
            "--command",
            parent_cmd,
            "--base",
            j.base,
            "--out",
            cassette,
            "--reuse",
            *cases,
        )
        == PASS
    ):
        j.run(
            "replay",
            "replay_cassettes.py",
            "--cassette",
            cassette,
            "--parent-command",
            parent_cmd,
            "--patch-command",
            patch_cmd,
            "--allowlist",
            evidence_tree / "oracle" / "allowlist.yaml",
            *cases,
        )
    j.run(
        "assert-inventory",
        "count_asserts.py",
        "--parent",
        j.parent,
        "--patch",
        j.patch,
        "--repo",
        j.repo,
        "--base",
        j.base,
        "--head",
        j.head,
        "--config",
        config,
    )
    oracle = j.parent / "oracle"
    j.run(
        "oracle",
        "run_oracle.py",
        "--oracle",
        oracle,
        "--parent-python",
        parent_py,
        "--patch-python",
        patch_py,
    )
    try:
        quarantine, ledger = oracle_ref_files(j, tmp)
    except FailClosed as exc:
        j.record("quarantine", FAIL_CLOSED, str(exc))
        return
    j.run(
        "quarantine",
        "check_quarantine.py",
        "--file",
        quarantine,
        "--parent",
        j.parent,
        "--patch",
        j.patch,
    )
    flake = j.run(
        "flake-budget",
        "flake_budget.py",
        "--oracle-report",
        j.reports / "oracle.json",
        "--oracle",
        oracle,
        "--patch-python",
        patch_py,
        "--quarantine",
        quarantine,
        "--ledger",
        ledger,
        "--max-retry",
        str(j.config.flake_max_retry),
    )
    excuse_oracle(j, flake)
    j.run(
        "tests",
        "run_tests.py",
        "--tree",
        j.patch,
        "--python",
        patch_py,
        "--tests",
        *j.config.tests,
        advisory=True,
    )


def excuse_oracle(j: Judgment, flake: int) -> None:
    """Flake control is last and narrow: it may only excuse blocked oracle failures."""
    oracle = next((s for s in j.steps if s["name"] == "oracle"), None)
    if oracle and oracle["status"] == "block" and flake == PASS:
        oracle["status"] = "pass"
        oracle["summary"] += " (every failure excused by flake-budget)"


def verdict(steps: Sequence[dict[str, Any]]) -> int:
    return max((CODE[s["status"]] for s in steps), default=FAIL_CLOSED)


def summary_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"## Oracle judge: **{report['verdict']}** (exit {report['exit_code']})",
        "",
        f"base `{report['base'][:12]}` head `{report['head'][:12]}`",
        "",
        "| Step | Status | Evidence |",
        "|---|---|---|",
    ]
    for step in report["steps"]:
        text = str(step["summary"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {step['name']} | {step['status']} | {text} |")
    for step in report["steps"]:
        for mismatch in (step["evidence"].get("mismatches") or [])[:3]:
            lines += [
                "",
                f"`{mismatch['id']}` `{mismatch['field']}`",
                "```diff",
                mismatch["diff"],
                "```",
            ]
    lines += [
        "",
        "Decision table: `oracles/MATRIX.md`. Tests in the patch's write-set are advisory.",
    ]
    return "\n".join(lines) + "\n"


def publish(reports: Path, report: dict[str, Any]) -> None:
    write_json(reports / "judge-report.json", report)
    text = summary_markdown(report)
    (reports / "judge-summary.md").write_text(text, "utf-8")
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(text)
    print(
        f"judge: verdict {report['verdict']} (exit {report['exit_code']}); "
        f"see {reports / 'judge-report.json'}"
    )


def judge(args: argparse.Namespace, reports: Path, base_ref: list[str]) -> list[dict[str, Any]]:
    repo = repo_root(args.repo)
    git(repo, "worktree", "prune", check=False)
    head = resolve_commit(repo, args.head, "--head")
    base_ref[1] = head
    if args.base:
        base = resolve_commit(repo, args.base, "--base")
    else:
        here = load_config(repo / "oracle" / "judge.yaml")
        base = default_base(repo, head, here.base_branch)
    base_ref[0] = base
    with tempfile.TemporaryDirectory(prefix="oracle-judge-") as name:
        tmp = Path(name)
        parent = add_worktree(repo, base, tmp / "parent")
        patch = add_worktree(repo, head, tmp / "patch")
        try:
            config = load_config(parent / "oracle" / "judge.yaml")
            j = Judgment(repo, reports, base, head, parent, patch, config)
            gate(j, tmp, args.wheelhouse.resolve())
            return j.steps
        finally:
            remove_worktree(repo, parent)
            remove_worktree(repo, patch)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="exit codes: 0 merge, 1 block, 2 fail closed"
    )
    p.add_argument("--base", help="parent commit-ish (default: merge base with the base branch)")
    p.add_argument("--head", default="HEAD", help="patch commit-ish (default HEAD)")
    p.add_argument("--repo", type=Path, default=Path("."), help="the repository (default .)")
    p.add_argument("--reports", type=Path, default=Path("reports"), help="report folder")
    p.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE, help="local wheelhouse")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    reports = args.reports.resolve()
    reports.mkdir(parents=True, exist_ok=True)
    refs = [args.base or "", args.head]
    try:
        steps = judge(args, reports, refs)
    except FailClosed as exc:
        print(f"judge: fail-closed: {exc}", file=sys.stderr)
        steps = [{"name": "setup", "status": "fail-closed", "summary": str(exc), "evidence": {}}]
    except Exception as exc:
        print(f"judge: fail-closed: internal error {type(exc).__name__}: {exc}", file=sys.stderr)
        steps = [
            {
                "name": "setup",
                "status": "fail-closed",
                "summary": f"internal error: {exc}",
                "evidence": {},
            }
        ]
    code = verdict(steps)
    report = {
        "scripts_from": refs[0] if steps[0]["name"] != "setup" else "",
        "verdict": VERDICT[code],
        "exit_code": code,
        "base": refs[0],
        "head": refs[1],
        "steps": steps,
    }
    publish(reports, report)
    return code


if __name__ == "__main__":
    sys.exit(main())
