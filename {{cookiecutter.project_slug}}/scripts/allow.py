"""Add a reviewed allowlist row that amends one recording: the base it was reviewed against.

    python scripts/allow.py --id CASE --field SPEC --reason TEXT --reviewer @handle [--head REF]

Appends to oracle/allowlist.yaml a row naming the case (or test id), the field (a compare spec
of the case, `inventory:<rule>`, or `crossrun`: a parent test that may fail on the patch), the
reason, the reviewer and `base`: the merge base of
--head and the base branch, computed as the judge computes it (or --base REF). Run it on a
checkout of the patch's branch; the judge then uses the row under ORACLE_REVIEW=1.

A row applies only while the judged base is its `base` (a commit sha of at least 7 hex digits,
matched as a prefix). Once the base moves, the row no longer applies: replay and the assert
inventory report it for clean-up and never fail closed over it, so a row left on the base branch
can never widen a later patch. This module also holds the row schema both steps read.
Exit codes: 0 row written, 2 fail closed (bad input, a duplicate row, an unknown case or spec).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from _gate.core.allowlist import ALLOW_FIELDS, CROSSRUN, INVENTORY, Row, load_allowlist
from _gate.core.config import load_config
from _gate.core.protocol import EXIT_CODES_HELP, PASS, FailClosed, Outcome, add_report_arg
from _gate.runs.cases import load_cases
from _gate.runs.entry import run_main
from _gate.runs.git import default_base, repo_root, resolve_commit
from _gate.runs.perturb import TOUCHED

# --- the command -------------------------------------------------------------------------------


def row_lines(row: Row) -> list[str]:
    """JSON strings are YAML double-quoted scalars: every value, a digit-only sha too, stays a
    string."""
    values = row.as_dict()
    lines = [f"  {name}: {json.dumps(values[name], ensure_ascii=False)}" for name in ALLOW_FIELDS]
    return ["- " + lines[0].lstrip(), *lines[1:]]


def with_row(text: str, row: Row, path: Path) -> str:
    """`text` with `row` appended to its block-style `allow:` list, comments kept."""
    lines = text.splitlines()
    head = next((i for i, line in enumerate(lines) if line.startswith("allow:")), None)
    if head is None and all(not ln.strip() or ln.lstrip().startswith("#") for ln in lines):
        return "\n".join([*lines, "allow:", *("  " + ln for ln in row_lines(row))]) + "\n"
    if head is None or not re.fullmatch(r"allow:\s*(\[\s*\])?\s*(#.*)?", lines[head]):
        raise FailClosed(
            f"{path}: its `allow:` list is not in block style, so the row cannot be appended; "
            f"add it by hand: {json.dumps(row.as_dict(), ensure_ascii=False)}"
        )
    items = [re.match(r"(\s*)- ", line) for line in lines[head + 1 :]]
    indent = next((m.group(1) for m in items if m), "  ")
    lines[head] = "allow:"
    return "\n".join([*lines, *(indent + ln for ln in row_lines(row))]) + "\n"


def checked_base(args: argparse.Namespace, repo: Path) -> str:
    if args.base:
        return resolve_commit(repo, args.base, "--base")
    config = load_config(repo / args.config)
    return default_base(repo, resolve_commit(repo, args.head, "--head"), config.base_branch)


def check_target(row: Row, cases_file: Path) -> None:
    """A cassette row must name a case and one of its compare specs; typos fail here, not later
    as a stale row in the judge."""
    if row.field == CROSSRUN:
        if "::" not in row.id:
            raise FailClosed(f"--id {row.id!r}: a crossrun row names a test id, path::name")
        return
    if row.field.startswith(INVENTORY):
        if not row.field[len(INVENTORY) :]:
            raise FailClosed(f"--field {row.field!r}: name the rule, e.g. inventory:fewer-asserts")
        return
    case = next((c for c in load_cases(cases_file) if c.id == row.id), None)
    if case is None:
        raise FailClosed(f"--id {row.id!r}: no such case in {cases_file}; give a case id")
    if row.field not in (*case.compare, TOUCHED):  # what the files perturbation compares
        known = ", ".join((*case.compare, TOUCHED))
        raise FailClosed(f"--field {row.field!r}: case {row.id!r} compares only {known}")


def execute(args: argparse.Namespace) -> Outcome:
    repo = repo_root(args.repo)
    values = {"id": args.id, "field": args.field, "reason": args.reason, "reviewer": args.reviewer}
    for name, value in values.items():
        if not value.strip():
            raise FailClosed(f"--{name} is empty; a reviewed row names it")
    row = Row(base=checked_base(args, repo), **values)
    check_target(row, repo / args.cases)
    path = repo / args.allowlist
    rows = load_allowlist(path) if path.exists() else []
    if any((r.id, r.field) == (row.id, row.field) and r.applies_to(row.base) for r in rows):
        raise FailClosed(f"{path}: already allows {row.id} {row.field} at {row.base[:12]}")
    text = with_row(path.read_text("utf-8") if path.exists() else "", row, path)
    write_checked(path, text, [*rows, row])
    summary = f"{path}: allowed {row.id} {row.field} for base {row.base[:12]}"
    return Outcome(PASS, summary + "; commit it and judge under ORACLE_REVIEW=1", row.as_dict())


def write_checked(path: Path, text: str, expected: list[Row]) -> None:
    """Replace the allowlist only once the new text reads back as exactly the rows meant."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, "utf-8")
    try:
        if not reads_back(tmp, expected):
            raise FailClosed(f"{path}: the row would not read back as written; add it by hand")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def reads_back(path: Path, expected: list[Row]) -> bool:
    try:
        return load_allowlist(path) == expected
    except FailClosed:
        return False


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--id", required=True, help="case id (or test id for inventory:RULE)")
    p.add_argument(
        "--field", required=True, help="a compare spec of the case, inventory:RULE, or crossrun"
    )
    p.add_argument("--reason", required=True, help="why the change is intended and harmless")
    p.add_argument("--reviewer", required=True, help="who reviewed it, e.g. @alice")
    p.add_argument("--head", default="HEAD", help="the patch (default HEAD)")
    p.add_argument("--base", help="the reviewed base (default: merge base, as the judge)")
    p.add_argument("--repo", type=Path, default=Path("."), help="git repository")
    p.add_argument("--allowlist", type=Path, default=Path("oracle/allowlist.yaml"))
    p.add_argument("--cases", type=Path, default=Path("oracle/cases.yaml"))
    p.add_argument("--config", type=Path, default=Path("oracle/judge.yaml"))
    add_report_arg(p, "allow")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("allow", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
