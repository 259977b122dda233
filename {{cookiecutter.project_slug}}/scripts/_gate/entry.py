"""A step script's entry: `run_main` parses, runs, reports, whether the judge started the step
with its judgment (`--judgment FILE`) or a person with the step's own flags."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from _gate.context import Judgment, load_judgment
from _gate.protocol import (
    EXIT_CODES_HELP,
    PASS,
    Outcome,
    Report,
    add_report_arg,
    concluded,
    say,
)
from _gate.reports import write_report
from _gate.sandbox import require_sandbox

# What a step's `run` gets: the judgment, and the outcomes of the earlier steps it reads.
Judged = Callable[[Judgment, Mapping[str, Report]], Outcome]


def run_main(
    name: str,
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], Outcome],
    argv: Sequence[str] | None,
    judged: Judged | None = None,
) -> int:
    """Parse, run, report. Every failure ends as one line and a report, never a traceback.

    `--judgment FILE --report R` (how the judge starts a step as a process) runs `judged`
    on the judgment the judge wrote, with the earlier outcomes it holds; any other argv is a
    hand run of `body` on the step's own flags."""
    args = sys.argv[1:] if argv is None else list(argv)
    if judged is not None and args[:1] == ["--judgment"]:
        given = judgment_parser(name).parse_args(args)

        def body_judged() -> Outcome:
            j, earlier = load_judgment(given.judgment)
            require_sandbox(j.config.sandbox == "required")
            return judged(j, earlier)

        report = concluded(name, body_judged)
        path: Path = given.report
    else:
        parsed = parser.parse_args(args)
        report = concluded(name, lambda: body(parsed))
        path = parsed.report
    write_report(path, report.payload())
    say(f"{name}: {report.status}: {report.summary}", error=report.exit_code != PASS)
    return report.exit_code


def judgment_parser(name: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"{name} --judgment", epilog=EXIT_CODES_HELP)
    p.add_argument("--judgment", type=Path, required=True, help="the judge's judgment file")
    add_report_arg(p, name)
    return p
