"""Proposed cases: inputs that tell a mutant the oracle misses from the code (scripts/strength.py).

For a missed mutant, the cases whose run reaches its function (mutmut's coverage pass of the
cassette tests) are tried as they are, comparing more, then varied one input at a time: each
value of the stdin's JSON document (a number moved by one, to zero, negated or made large; a
string emptied, extended or recased; a flag flipped; an item or a key dropped), then each
argument (dropped; a number moved; any other text varied as a string is; an option's name is
kept). Each variant runs twice on the unmutated code; the fields
that agree in both runs (the case's own, the exit code, stdout and stderr) are the ones it may
compare. The first variant whose run under the mutant changes one of them is a proposed case,
and it is tried first for the next mutants. A maintainer reviews it and copies it into
oracle/cases.yaml: nothing here edits the oracle.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from itertools import islice, zip_longest
from pathlib import Path
from typing import Any

from _gate.runs.case_runs import observe, run_many
from _gate.runs.cases import Case, holds

VARIANTS_PER_MUTANT = 30  # inputs tried per mutant: a bound, not a search


def numbers(value: int | float) -> list[int | float]:
    return [value + 1, value - 1, 0, -value, value * 100 + 7]


def texts(value: str) -> list[str]:
    """A string emptied, extended, in another case, with spaces, punctuation and digits."""
    found = ["", value + "x", value.upper(), value.lower(), f" {value}  {value}-_.9 "]
    return [text for text in dict.fromkeys(found) if text != value]


def under_key(head: str, what: str) -> str:
    return head + what if what.startswith("/") else f"{head} {what}"


def changed(value: Any) -> Iterator[tuple[str, Any]]:
    """(what changed, the document so changed) for every value of a JSON document."""
    if isinstance(value, bool):
        yield f"= {json.dumps(not value)}", not value
    elif isinstance(value, (int, float)):
        yield from ((f"= {n}", n) for n in numbers(value) if n != value)
    elif isinstance(value, str):
        yield from ((f"= {json.dumps(text)}", text) for text in texts(value))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield f"/{index} dropped", value[:index] + value[index + 1 :]
            for what, new in changed(item):
                yield under_key(f"/{index}", what), [*value[:index], new, *value[index + 1 :]]
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"/{key} dropped", {k: v for k, v in value.items() if k != key}
            for what, new in changed(item):
                yield under_key(f"/{key}", what), {**value, key: new}


def variants(case: Case) -> Iterator[tuple[str, Case]]:
    """(what changed, the case changed so): first the case itself (its wider comparison may
    be all it takes), then each input of the case, one at a time."""
    yield "as it is", case
    try:
        doc = json.loads(case.stdin) if case.stdin.strip() else None
    except ValueError:
        doc = None
    if doc is not None:
        for where, new in changed(doc):
            stdin = json.dumps(new, ensure_ascii=False).encode()
            yield f"stdin {where}", dataclasses.replace(case, stdin=stdin)
    for index, arg in enumerate(case.argv):
        rest = case.argv[:index], case.argv[index + 1 :]
        yield f"argv dropped {arg!r}", dataclasses.replace(case, argv=rest[0] + rest[1])
        if arg.lstrip("-").isdigit():
            others = [str(n) for n in numbers(int(arg))]
        else:
            others = [] if arg.startswith("-") else texts(arg)  # an option's name stays
        for other in others:
            argv = (*rest[0], other, *rest[1])
            yield f"argv {arg!r} -> {other!r}", dataclasses.replace(case, argv=argv)


def compared(case: Case) -> Case:
    """The case comparing more than its own fields: the exit code and both streams whole (the
    two runs on the code keep only what was stable)."""
    fields = ("exit_code", *case.compare, "stdout.raw", "stderr.raw")
    return dataclasses.replace(case, compare=tuple(dict.fromkeys(fields)))


def under(case: Case, mutant: str, mutated: str) -> Case:
    env = (*case.env, ("MUTANT_UNDER_TEST", mutant), ("PYTHONPATH", mutated))
    return dataclasses.replace(case, env=env)


@dataclasses.dataclass
class Search:
    """The search for proposed cases: the build to run, and what it learnt so far (each
    variant's stable fields on the code, and the variants that told some mutant apart)."""

    command: Path
    mutated: str
    fixtures: Path
    stable: dict[Case, dict[str, Any]] = dataclasses.field(default_factory=dict)
    found: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def fields(self, cases: Sequence[Case]) -> list[dict[str, Any]]:
        """Each variant's fields that agree over two runs of the code (each computed once)."""
        todo = [case for case in dict.fromkeys(cases) if case not in self.stable]
        runs = [(self.command, under(case, "", self.mutated)) for case in todo for _ in "ab"]
        done = run_many(runs, self.fixtures, "")
        for index, case in enumerate(todo):
            first, second = (observe(case, run) for run in done[2 * index : 2 * index + 2])
            self.stable[case] = {f: v for f, v in first.items() if second.get(f) == v}
        return [self.stable[case] for case in cases]

    def first_telling(self, cases: Sequence[Case], mutant: str) -> tuple[int, list[str]] | None:
        """The first of `cases` whose run under the mutant changes a stable field as replay
        would block on it (`holds`), and those fields; the cases run side by side."""
        stable = self.fields(cases)
        runs = [(self.command, under(case, mutant, self.mutated)) for case in cases]
        for index, run in enumerate(run_many(runs, self.fixtures, "")):
            seen = observe(cases[index], run)
            differ = [f for f, value in stable[index].items() if not holds(f, value, seen.get(f))]
            if differ:
                return index, differ
        return None

    def tells(self, row: dict[str, Any], cases: Sequence[Case], new: bool) -> None:
        """Find a case that tells the mutant apart: first among the proposals so far (one case
        often kills its function's next mutant too), then, if `new`, among the variants of
        the cases that reach its function, a few of each case in turn, a core's worth at once
        and no more once one tells."""
        told = self.first_telling([found["case"] for found in self.found], row["mutant"])
        if told is not None:
            index, differ = told
            self.found[index]["kills"].append((row, differ))
            return
        each = [((case.id, what, v) for what, v in variants(case)) for case in cases]
        turns = (job for batch in zip_longest(*each) for job in batch if job is not None)
        tried = islice(turns, VARIANTS_PER_MUTANT if new else 0)
        while batch := list(islice(tried, os.cpu_count() or 1)):
            told = self.first_telling([variant for _, _, variant in batch], row["mutant"])
            if told is not None:
                index, differ = told
                case_id, what, variant = batch[index]
                origin = f"case {case_id}, {what}"
                self.found.append({"from": origin, "case": variant, "kills": [(row, differ)]})
                return


def propose(
    missed: Sequence[dict[str, Any]],
    reach: dict[str, list[str]],
    cases: dict[str, Case],
    search: Search,
    limit: int,
) -> list[dict[str, Any]]:
    """Up to `limit` proposed cases for the mutants of `missed`, tried in that order; new
    cases are searched for the first 2 * `limit` mutants only (an equivalent mutant exhausts
    every search), the rest are only checked against the cases found."""
    for count, row in enumerate(missed):
        function = row["mutant"].rpartition("__mutmut_")[0]
        reaching = [compared(cases[c]) for c in reach.get(function, []) if c in cases]
        search.tells(row, reaching, new=len(search.found) < limit and count < 2 * limit)
    return [proposal(found, search.stable[found["case"]]) for found in search.found]


def proposal(found: dict[str, Any], stable: dict[str, Any]) -> dict[str, Any]:
    """The proposed case, as cases.yaml holds one, with the mutants it kills and how."""
    case: Case = found["case"]
    first = found["kills"][0][0]
    number = first["mutant"].rpartition("_")[2]
    text = case.stdin.decode("utf-8", "replace")
    made: dict[str, Any] = {"id": f"proposed-{first['function'].strip('_')}-{number}"}
    made["argv"] = list(case.argv)
    made.update({"stdin": text} if text else {})
    made.update({"env": dict(case.env)} if case.env else {})
    made.update({"cwd": case.cwd} if case.cwd else {})
    made["compare"] = sorted(stable)
    made["from"] = found["from"]
    made["kills"] = [
        {"mutant": row["mutant"], "at": f"{row['file']}:{row['line']}", "code": row["code"]}
        | {"differ": differ}
        for row, differ in found["kills"]
    ]
    return made


def as_yaml(proposals: Sequence[dict[str, Any]], header: str) -> str:
    """proposed-cases.yaml: each case under comments naming the mutants it kills."""
    import yaml  # local import: scripts/strength.py --help works before PyYAML is installed

    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    if not proposals:
        return "\n".join([*lines, "cases: []"]) + "\n"
    lines.append("cases:")
    for made in proposals:
        lines.append(f"  # varied from {made['from']}; kills:")
        lines += [
            f"  #   {k['mutant']} at {k['at']} `{k['code']}` ({', '.join(k['differ'])} differ)"
            for k in made["kills"]
        ]
        case = {key: value for key, value in made.items() if key not in ("from", "kills")}
        text = yaml.safe_dump([case], sort_keys=False, allow_unicode=True, width=10_000)
        lines += [*(f"  {line}" for line in text.splitlines()), ""]
    return "\n".join(lines)
