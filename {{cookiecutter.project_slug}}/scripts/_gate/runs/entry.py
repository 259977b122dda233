"""A step's contract and its entry: a step module gives `Contract(name, parser, from_args,
inputs, decide)`; `Contract.main` parses, decides, reports, whether the judge started the step
with its judgment (`--judgment FILE`) or a person with the step's own flags. Both build the
same typed `Inputs` (a frozen dataclass of the step's module) and call the same `decide`, so a
line of a step's body never sees where a value came from. The judge calls
`decide(inputs(judgment), earlier)` in its own process, or starts the script with the
judgment in a file; no step builds argv for its own parser. `run_main` is the entry of the
tools that are not steps (they take their flags only)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from _gate.core.context import Judgment, load_judgment
from _gate.core.protocol import (
    EXIT_CODES_HELP,
    PASS,
    Outcome,
    Report,
    add_report_arg,
    concluded,
    say,
)
from _gate.core.reports import Names, write_report
from _gate.core.steps import BY_NAME
from _gate.runs.sandbox import require_sandbox

InputsT = TypeVar("InputsT")  # a step's Inputs
Earlier = Mapping[str, Report]  # the outcomes of the earlier steps a step reads, by step name
# What a step decides on: its inputs, the earlier outcomes it reads, its folders' names.
Given = tuple[InputsT, Earlier, Names]


def nothing_earlier(args: argparse.Namespace) -> Earlier:
    return {}


def never(given: object) -> bool:
    return False


@dataclass(frozen=True)
class Contract(Generic[InputsT]):
    """A step: its flags, the two ways to its typed inputs, and its decision."""

    name: str  # as the step table names it
    parser: Callable[[], argparse.ArgumentParser]
    from_args: Callable[[argparse.Namespace], InputsT]  # a hand run: the step's flags
    inputs: Callable[[Judgment], InputsT]  # a judge run: judge.yaml, the builds, the trees
    decide: Callable[[InputsT, Earlier], Outcome]
    # By hand, the earlier outcomes a step reads come from the report files its flags name.
    reported: Callable[[argparse.Namespace], Earlier] = nothing_earlier
    # Whether these inputs leave the verdict alone (the crossrun's `crossrun: advisory`); a
    # step the table says never decides is advisory whatever its inputs.
    advisory: Callable[[InputsT], bool] = never
    # Where the table says `beside_build`: what the step takes on the judgment once the parent
    # is built (its environment), before the patch's build is (`stop()` says it is), as JSON.
    beside_build: Callable[[Judgment, Path, Callable[[], bool]], object] | None = None

    def judged(self, j: Judgment, earlier: Earlier) -> Report:
        """The step on a judgment: what the judge calls, in its process or in the step's."""
        return self.concluded(lambda: (self.inputs(j), earlier, j.names))

    def main(self, argv: Sequence[str] | None = None) -> int:
        """`--judgment FILE --report R` (how the judge starts a step as a process) decides on
        the judgment the judge wrote, with the earlier outcomes it holds; any other argv is a
        hand run on the step's own flags. Every failure ends as one line and a report."""
        args = sys.argv[1:] if argv is None else list(argv)
        if args[:1] == ["--judgment"]:
            given = judgment_parser(self.name).parse_args(args)

            def judgment() -> Given[InputsT]:
                j, earlier = load_judgment(given.judgment)
                require_sandbox(j.config.sandbox == "required")
                return self.inputs(j), earlier, j.names

            return reported(self.name, given.report, self.concluded(judgment))
        parsed = self.parser().parse_args(args)

        def by_hand() -> Given[InputsT]:
            return self.from_args(parsed), self.reported(parsed), Names()

        return reported(self.name, parsed.report, self.concluded(by_hand))

    def concluded(self, given: Callable[[], Given[InputsT]]) -> Report:
        """Decide on what `given` makes; any failure, of the inputs too, is the step's outcome
        (`protocol.concluded`). The status is told here, once: advisory where the step table
        or the inputs say so (`Report.advisory`); paths by the judgment's names."""
        advisory = not BY_NAME[self.name].decides
        names = Names()

        def body() -> Outcome:
            nonlocal advisory, names
            inputs, earlier, names = given()
            advisory = advisory or self.advisory(inputs)
            return self.decide(inputs, earlier)

        report = concluded(self.name, body).renamed(names)
        return report.advisory() if advisory else report


def run_main(
    name: str,
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], Outcome],
    argv: Sequence[str] | None,
) -> int:
    """A tool's entry (not a step): parse, run, report. Every failure ends as one line and a
    report, never a traceback."""
    parsed = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    return reported(name, parsed.report, concluded(name, lambda: body(parsed)))


def reported(name: str, path: Path, report: Report) -> int:
    """Write the report, say its line; the exit code."""
    write_report(path, report.payload())
    say(f"{name}: {report.status}: {report.summary}", error=report.exit_code != PASS)
    return report.exit_code


def judgment_parser(name: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"{name} --judgment", epilog=EXIT_CODES_HELP)
    p.add_argument("--judgment", type=Path, required=True, help="the judge's judgment file")
    add_report_arg(p, name)
    return p
