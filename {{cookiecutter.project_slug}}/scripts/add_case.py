"""Add a case to oracle/cases.yaml from a command line: run it twice, keep what is stable.

    python scripts/add_case.py [--id ID] [--stdin TEXT | --stdin-file F] [--cwd DIR] -- ARG...

The case runs as `record` runs it (an empty HOME and working directory, fixed environment), twice,
on a build of --ref (default HEAD: the base the case is added to). It compares the exit code,
stdout (additively for `--help` or `-h`: added text passes; as JSON when both runs print JSON;
else as text) and stderr's SHA-256; a field that differs between the two runs is left out and
reported. The case also runs once on a build of
--ref's parent commit, where it builds: a field whose only difference there is a version or a
commit id (`1.4.0`, `3.0.1.dev4+g1a2b3c4`) would differ on every commit, and is left out too,
as is a field that prints the build's own version (its METADATA's): it changes at a release.
Each field is printed with its value (`case: exit_code = 0`) before anything is asked or
saved. A run that looks wrong (a non-zero exit,
a Python traceback, a usage message, a timeout) is shown before anything is saved, and saved
only with --yes or a yes at the prompt: a case records what the base does, mistakes included.
The case is appended to the end of cases.yaml, comments kept, and the file is read back.
Exit codes: 0 saved, 1 not saved (not confirmed), 2 fail closed (bad arguments, an id already
in use, a base that does not build, a cases.yaml the case cannot be appended to).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _gate.core.protocol import PASS, FailClosed, Outcome, add_report_arg, say
from _gate.runs.case_runs import Run, built_cli, observe, run_many
from _gate.runs.cases import Case, load_cases, parse_case
from _gate.runs.cassettes import RUNS, traceback_line
from _gate.runs.entry import run_main
from _gate.runs.envs import WHEELHOUSE, dist_infos
from _gate.runs.git import committed_config, repo_root, resolve_commit
from _gate.runs.sandbox import require_sandbox

NOT_SAVED = 1
USAGE = re.compile(rb"^(usage|error):", re.IGNORECASE | re.MULTILINE)
ID_TAKEN_LIMIT = 100


def on_parent(
    args: argparse.Namespace, repo: Path, sha: str, command: str, case: Case
) -> tuple[dict[str, Any] | None, str]:
    """What the case shows on the commit before `sha` (one run), to find fields that change
    with every commit; None, and why, where there is no such commit or it does not build."""
    try:
        parent = resolve_commit(repo, f"{sha}^", "--ref")
        with built_cli(repo, parent, args.wheelhouse, args.requirements, command) as built:
            run = run_many([(built.cli, case)], repo / "fixtures", "case")[0]
    except FailClosed as exc:
        return None, f"recorded on {sha[:12]} only: its parent {exc}"
    return observe(case, run), f"compared with its parent {parent[:12]}"


# A token that differs between two commits' outputs only because each has its own version or
# id: 1.4.0, v2.0.1rc1, 3.0.1.dev4+g1a2b3c4, a commit's hex.
VERSION_TOKEN = re.compile(
    r"v?\d+(?:\.\d+)+(?:[.-]?(?:dev|post|rc|a|b)\d*)*(?:\+[\w.]+)?|g?[0-9a-f]{7,40}"
)
TOKEN = re.compile(r"[\w.+-]+")


def version_only(before: Any, after: Any) -> bool:
    """Whether every token that differs between the two values is a version or a commit id."""
    old, new = (set(TOKEN.findall(json.dumps(v))) for v in (before, after))
    changed = old ^ new
    return bool(changed) and all(VERSION_TOKEN.fullmatch(token) for token in changed)


def own_version(cli: Path, command: str) -> str:
    """The version of the distribution that installs `command` in the build's environment
    (its METADATA): a field that prints it changes at every release, though the parent commit
    printed the same."""
    declares = re.compile(rf"^\s*{re.escape(command)}\s*=", re.MULTILINE)
    for info in sorted(dist_infos(cli.parent.parent)):
        points = info / "entry_points.txt"
        if points.is_file() and declares.search(points.read_text("utf-8", "replace")):
            found = re.search(r"^Version:\s*(\S+)", (info / "METADATA").read_text("utf-8"), re.M)
            return found.group(1) if found else ""
    return ""


def prints_version(version: str, value: Any) -> bool:
    """Whether `value` holds `version` (with a dot: `1.4`, not `1`) as a token of its own."""
    tokens = {token.removeprefix("v") for token in TOKEN.findall(json.dumps(value))}
    return "." in version and version in tokens


def case_id(argv: Sequence[str], taken: set[str]) -> str:
    """A readable id from the command line, made unique with -2, -3, ..."""
    stem = re.sub(r"[^a-z0-9]+", "-", " ".join(argv).lower()).strip("-")[:60] or "case"
    for n in range(1, ID_TAKEN_LIMIT):
        candidate = stem if n == 1 else f"{stem}-{n}"
        if candidate not in taken:
            return candidate
    raise FailClosed(f"ids {stem!r} to {stem}-{ID_TAKEN_LIMIT} are taken; pass --id")


def draft(args: argparse.Namespace, case_id: str) -> dict[str, Any]:
    """The case as it will be written, but for `compare`: only the fields the author gave."""
    raw: dict[str, Any] = {"id": case_id, "argv": list(args.argv)}
    if args.stdin_file is not None:
        raw["stdin"] = args.stdin_file.read_text("utf-8")
    elif args.stdin is not None:
        raw["stdin"] = args.stdin
    if args.cwd:
        raw["cwd"] = args.cwd
    return raw


HELP_FLAGS = ("--help", "-h")


def stdout_spec(argv: Sequence[str], runs: Sequence[Run]) -> str:
    """Help text additively (an added option only adds to it: cases.holds), JSON parsed, any
    other output as text."""
    if any(arg in HELP_FLAGS for arg in argv):
        return "stdout.additive"
    try:
        for run in runs:
            json.loads(run.stdout.head.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "stdout.raw"
    return "stdout.json"


def suspicious(runs: Sequence[Run]) -> list[str]:
    """What an author should look at before the run becomes the contract."""
    run = runs[0]
    found = []
    if any(r.timed_out for r in runs):
        found.append("it timed out")
    elif run.exit_code != 0:
        found.append(f"it exits {run.exit_code}")
    if exception := traceback_line(run):
        found.append(f"stderr holds a Python traceback ({exception})")
    # A usage message is the answer to `--help` (exit 0); with a failing exit, a mistake.
    if run.exit_code != 0 and (USAGE.search(run.stderr.head) or USAGE.search(run.stdout.head)):
        found.append("it prints a usage or argument error")
    return found


SHOWN = 240  # characters of a field's value shown


def shown(
    seen: dict[str, Any],
    stable: Sequence[str],
    unstable: dict[str, list[Any]],
    versioned: dict[str, list[Any]],
) -> list[str]:
    """Each field the case will compare, with the value it will hold the build to, and each
    left out, with the two values that differed."""
    lines = [f"case: {spec} = {preview(seen[spec])}" for spec in stable]
    lines += [
        f"case: {spec} left out, it differed between two runs: {preview(a)} then {preview(b)}"
        for spec, (a, b, *_) in unstable.items()
    ]
    lines += [
        f"case: {spec} left out, it changes with the version or commit: {preview(a)} on the "
        f"parent commit, {preview(b)} here"
        if a is not None
        else f"case: {spec} left out, it prints the build's own version: {preview(b)}"
        for spec, (a, b) in versioned.items()
    ]
    return lines


def preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text)} characters)"


def confirmed(args: argparse.Namespace, found: Sequence[str]) -> bool:
    if not found or args.yes:
        return True
    for line in found:
        say(f"case: look first: {line}", error=True)
    if not sys.stdin.isatty():
        return False
    return input("case: save it anyway? [y/N] ").strip().lower() in ("y", "yes")


def append_case(path: Path, raw: dict[str, Any], timeout: float) -> None:
    """Append as YAML flow values (JSON), keep the file's comments, and read it back: a file
    the case does not land at the end of is restored and fails closed."""
    before = path.read_text("utf-8") if path.exists() else "cases:\n"
    text = re.sub(r"^cases:\s*\[\s*\]\s*$", "cases:", before, count=1, flags=re.MULTILINE)
    lines = [f"  - id: {json.dumps(raw['id'])}"]
    lines += [f"    {key}: {json.dumps(value)}" for key, value in raw.items() if key != "id"]
    path.write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n", "utf-8")
    try:
        cases = load_cases(path, timeout)
        landed = bool(cases) and cases[-1].id == raw["id"]
    except FailClosed:
        landed = False
    if not landed:
        path.write_text(before, "utf-8")
        raise FailClosed(
            f"{path}: the case could not be appended after the last case ('cases:' must be the "
            f"file's last key); add it by hand: {json.dumps(raw)}"
        )


def try_case(
    args: argparse.Namespace, raw: dict[str, Any], command: Path, fixtures: Path
) -> tuple[Case, list[Run], list[dict[str, Any]]]:
    """Run the case twice; return it with the fields to compare, its runs and what each saw."""
    probe = parse_case({**raw, "compare": ["exit_code"]}, 0, args.cases, args.timeout)
    runs = run_many([(command, probe)] * RUNS, fixtures, "case")
    compare = ["exit_code", stdout_spec(probe.argv, runs), "stderr.sha256"]
    case = parse_case({**raw, "compare": compare}, 0, args.cases, args.timeout)
    return case, runs, [observe(case, run) for run in runs]


def execute(args: argparse.Namespace) -> Outcome:
    if not args.argv:
        raise FailClosed("no command line given: pass the CLI's arguments after --")
    repo = repo_root(args.repo)
    config = committed_config(repo, args.config)
    require_sandbox(config.sandbox == "required")
    args.cases = repo / args.cases
    args.timeout = args.timeout or config.case_timeout
    taken = {c.id for c in load_cases(args.cases, args.timeout)} if args.cases.exists() else set()
    if args.id in taken:
        raise FailClosed(f"{args.cases}: case id {args.id!r} is already in use; pick another --id")
    raw = draft(args, args.id or case_id(args.argv, taken))
    sha = resolve_commit(repo, args.ref, "--ref")
    with built_cli(repo, sha, args.wheelhouse, args.requirements, config.command) as built:
        case, runs, seen = try_case(args, raw, built.cli, repo / "fixtures")
        version = own_version(built.cli, config.command)
    stable = [spec for spec in case.compare if all(s[spec] == seen[0][spec] for s in seen)]
    unstable = {spec: [s[spec] for s in seen] for spec in case.compare if spec not in stable}
    before, note = on_parent(args, repo, sha, config.command, case)
    versioned = {
        spec: [before[spec], seen[0][spec]]
        for spec in stable
        if before is not None and version_only(before[spec], seen[0][spec])
    }
    versioned |= {
        spec: [None, seen[0][spec]]
        for spec in stable
        if spec not in versioned and prints_version(version, seen[0][spec])
    }
    stable = [spec for spec in stable if spec not in versioned]
    found = suspicious(runs)
    evidence = {"case": case.id, "ref": sha, "build": built.came, "seen": seen[0]}
    evidence["unstable"] = unstable
    evidence.update(suspicious=found, versioned=sorted(versioned), parent=note)
    if not stable:
        raise FailClosed(f"case {case.id!r}: no field was the same in both runs; nothing to save")
    for line in shown(seen[0], stable, unstable, versioned):
        say(line)
    if not confirmed(args, found):
        why = f"case {case.id!r} not saved: {found[0]}; rerun with --yes to save it anyway"
        return Outcome(NOT_SAVED, why, evidence, status="not-saved")
    append_case(args.cases, {**raw, "compare": stable}, args.timeout)
    left_out = f"; left out as unstable: {', '.join(unstable)}" if unstable else ""
    if versioned:
        left_out += f"; left out as changing with the version: {', '.join(versioned)}"
    saved = f"case {case.id!r} saved to {args.cases}, comparing {', '.join(stable)}{left_out}"
    return Outcome(PASS, saved, evidence, status="saved")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="exit codes: 0 saved, 1 not saved (not confirmed), 2 fail closed",
    )
    p.add_argument("argv", nargs="*", help="the CLI's arguments (after --)")
    p.add_argument("--id", help="case id (default: made from the arguments)")
    stdin = p.add_mutually_exclusive_group()
    stdin.add_argument("--stdin", help="text given on standard input")
    stdin.add_argument("--stdin-file", type=Path, help="file whose text is given on stdin")
    p.add_argument("--cwd", help="folder under fixtures/ copied fresh as the working directory")
    p.add_argument("--yes", action="store_true", help="save even when the run looks wrong")
    p.add_argument("--ref", default="HEAD", help="commit whose build runs the case (default HEAD)")
    p.add_argument("--timeout", type=float, help="seconds (default: case_timeout in judge.yaml)")
    p.add_argument("--repo", type=Path, default=Path("."))
    p.add_argument("--cases", type=Path, default=Path("oracle/cases.yaml"))
    p.add_argument("--config", type=Path, help="default: oracle/judge.yaml as HEAD commits it")
    p.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE, help="local wheelhouse")
    p.add_argument("--requirements", type=Path, default=Path("scripts/requirements-judge.txt"))
    add_report_arg(p, "case")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("case", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
