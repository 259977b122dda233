"""Preconditions of a judgment: offline, no model endpoint, the decision table, some oracle.

    python scripts/preconditions.py --tree BASE_TREE [--patch-tree HEAD_TREE]
        [--strength ORACLE_REF/strength.json]

The judge must be a judge, not another generator: JUDGE_OFFLINE=1 must be set (the nox session
sets it), no model endpoint variable may be set (MODEL_ENDPOINT, MODEL_API_KEY, OPENAI_API_KEY,
ANTHROPIC_API_KEY, plus `model_env` in oracle/judge.yaml). The base's decision table,
oracles/MATRIX.md, must name in its rows exactly the judge's steps, each as (`step`): every step
a judgment reports in some row, no step that does not exist, no row without one. Its CODEOWNERS
(.github/, the root or docs/, as GitHub reads it) must give an owner to every `protected` path
of judge.yaml and to /fixtures/: a protected path nobody owns is a review nobody is asked for.
The base must also hold oracle evidence: at least one cassette case in
oracle/cases.yaml or one property oracle (a test_*.py file under oracle/). With neither, every
later step would pass for want of anything to compare, and the gate would say merge. With
`strength_min` set, the oracle's strength score on the oracle ref (`nox -s strength --
--update-ref`) must exist and reach it. judge.yaml is checked against the trees it configures:
each `tests:` entry must be in the base tree and in the head tree (`--patch-tree`), unless
`crossrun: off` says the project's tests are not judged (a mistyped or moved entry would leave
the crossrun and the inventory nothing to run, and a step that ran nothing never passes), and
each case's `cwd` must be a folder under fixtures/ on the base.
Exit codes: 0 all hold, 2 fail closed (any does not). This step never blocks with 1.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _gate.core.config import Config, load_config
from _gate.core.context import Judgment
from _gate.core.patterns import CODEOWNERS, PLACEHOLDER_OWNER, codeowners, owners, placeholder
from _gate.core.protocol import (
    EXIT_CODES_HELP,
    FAIL_CLOSED,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
)
from _gate.core.steps import JUDGE_STEPS, MATRIX_STEP, decision_rows
from _gate.runs.cases import CASES, load_cases
from _gate.runs.entry import Contract, Earlier
from _gate.runs.git import git

MATRIX = "oracles/MATRIX.md"
FIXTURES = "/fixtures/"  # owned too: fixtures.lock judges its bytes, a code owner its changes
NO_EVIDENCE = (
    f"no oracle evidence in the base: {CASES} has no case and oracle/ has no test_*.py "
    f"property oracle; add a case to {CASES} (docs/add-a-case.md) or a property "
    "test under oracle/ on the base branch"
)


def property_oracles(tree: Path) -> list[str]:
    """test_*.py files under oracle/: the files the oracle step runs (oracle.py)."""
    oracle = tree / "oracle"
    return sorted(p.relative_to(tree).as_posix() for p in oracle.rglob("test_*.py") if p.is_file())


def matrix_problems(path: Path) -> list[str]:
    """What keeps the decision table from describing this judge, the first problem only."""
    try:
        rows = decision_rows(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError):
        return [f"{MATRIX} is missing from the base; restore the decision table"]
    if not rows:
        return [f"{MATRIX}: the decision table has no rows; restore it from the template"]
    named: set[str] = set()
    for number, cols in rows:
        steps = MATRIX_STEP.findall(cols[1])
        unknown = [step for step in steps if step not in JUDGE_STEPS]
        if not steps or unknown:
            what = f"{unknown[0]!r}, which is not a step of the judge" if unknown else "no step"
            return [
                f"{MATRIX} line {number}: row {cols[0]!r} names {what}; name the step that sees "
                f"it first as (`step`), one of {', '.join(JUDGE_STEPS)}"
            ]
        named.update(steps)
    missing = [step for step in JUDGE_STEPS if step not in named]
    if missing:
        return [f"{MATRIX}: no row names the judge's step {missing[0]!r}; add its row"]
    return []


def owner_problems(tree: Path, protected: Sequence[str]) -> tuple[list[str], list[str]]:
    """Problems and warnings: a protected path no CODEOWNERS rule gives an owner is a problem;
    one owned only by the template's placeholder is a problem where CI judges (`CI` set, as
    every CI service sets it), and a warning on a user's machine, where the bake's default
    must judge at once. A patch that needs its review fails there (write_set.py)."""
    found = codeowners(tree)
    if found is None:
        return [f"no CODEOWNERS in the base ({' or '.join(CODEOWNERS)}); restore it"], []
    where, rules = found
    for pattern in protected:
        probe = pattern.strip("/").replace("*", "x") + ("/x" if pattern.endswith("/") else "")
        who = owners(rules, probe)
        if not who:
            return [
                f"{where}: protected path {pattern} (oracle/judge.yaml) has no owner; add "
                f"`{pattern} @owners` so a code owner reviews it"
            ], []
        if placeholder(who):
            said = (
                f"{where}: protected path {pattern} is owned by {PLACEHOLDER_OWNER}, the "
                "template's placeholder, so nobody reviews it; put your team's handle there "
                "(e.g. `sed -i 's|@org/maintainers|@acme/maintainers|' " + f"{where}`)"
            )
            return ([said], []) if os.environ.get("CI") else ([], [said])
    return [], []


def tests_problems(config: Config, trees: Mapping[str, Path | None]) -> list[str]:
    """Each `tests:` entry missing from a tree the judgment runs its tests from: the crossrun
    would run none of the base's tests, the inventory none of the head's, and say pass.
    `crossrun: off` says in so many words that the project's tests are not judged."""
    if config.crossrun == "off":
        return []
    problems = []
    for side, tree in trees.items():
        missing = [entry for entry in config.tests if tree and not (tree / entry).exists()]
        if not tree or not missing:
            continue
        where = f"{side} tree{commit(tree)}"
        problems += [
            f"oracle/judge.yaml: field 'tests' entry {entry!r} is not in the {where}; "
            f"{TESTS_FIX[side]}"
            for entry in missing
        ]
    return problems


def commit(tree: Path) -> str:
    """` (commit abc123...)`: the commit a tree checks out ("" for a plain folder)."""
    sha = git(tree, "rev-parse", "--short=12", "HEAD", check=False).strip()
    return f" (commit {sha})" if sha else ""


TESTS_FIX = {
    "base": "name the base's tests folders or files (`git ls-files` shows them), or set "
    "`crossrun: off` if the project has no tests to judge",
    "head": "the patch removes or moves it: land the new `tests:` on the base first, then "
    "rebase the patch",
}


def read_score(path: Path | None) -> dict[str, Any] | None:
    """The strength score on the oracle ref (scripts/strength.py), None when there is none or
    it does not read as one."""
    try:
        data = json.loads(path.read_bytes()) if path is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("score"), (int, float)):
        return None
    return data


def strength_problems(path: Path | None, score: dict[str, Any] | None, minimum: float) -> list[str]:
    if not minimum:
        return []
    if score is None:
        return [
            f"{path or 'the oracle ref'}: no strength score, and judge.yaml sets strength_min "
            f"{minimum:.0%}; run `nox -s strength -- --update-ref` on the base"
        ]
    if score["score"] < minimum:
        return [
            f"the oracle kills {score['score']:.1%} of mutants (strength measured "
            f"{score.get('date', '?')}), below strength_min {minimum:.0%}: add the cases "
            "reports/proposed-cases.yaml proposes, or lower strength_min"
        ]
    return []


@dataclass(frozen=True)
class Inputs:
    """What the preconditions step decides on."""

    tree: Path  # the base tree
    patch_tree: Path | None  # the head tree (its `tests:` are checked)
    config: Config  # the base's judge.yaml
    strength: Path | None  # strength.json from the oracle ref


def inputs(j: Judgment) -> Inputs:
    return Inputs(j.parent, j.patch, j.config, j.oracle_ref.strength)


def from_args(args: argparse.Namespace) -> Inputs:
    config = load_config(args.tree / "oracle" / "judge.yaml")
    return Inputs(args.tree, args.patch_tree, config, args.strength)


def decide(given: Inputs, earlier: Earlier) -> Outcome:
    config, tree = given.config, given.tree
    problems = []
    if os.environ.get("JUDGE_OFFLINE") != "1":
        problems.append("JUDGE_OFFLINE=1 is not set; run the judge through `nox -s judge`")
    present = [name for name in config.model_variables if os.environ.get(name)]
    if present:
        problems.append(f"model endpoint variable {present[0]} is set; unset it for the judge")
    problems += matrix_problems(tree / MATRIX)
    owned, warnings = owner_problems(tree, [*config.protected, FIXTURES])
    problems += owned
    oracles = property_oracles(tree)
    problems += tests_problems(config, {"base": tree, "head": given.patch_tree})
    try:
        loaded = load_cases(tree / CASES, config.case_timeout)
    except FailClosed as exc:  # reported with the other problems, in one line
        problems.append(str(exc))
        loaded = None
    cases = None if loaded is None else len(loaded)
    problems += [
        f"{CASES}: case {case.id!r} field 'cwd': fixtures/{case.cwd} is not a folder on the "
        "base; add the folder (and `nox -s lock`) or fix the path"
        for case in loaded or []
        if case.cwd and not (tree / "fixtures" / case.cwd).is_dir()
    ]
    if cases == 0 and not oracles:
        problems.append(NO_EVIDENCE)
    score = read_score(given.strength)
    problems += strength_problems(given.strength, score, config.strength_min)
    evidence = {
        "model_variables_checked": list(config.model_variables),
        "set": present,
        "cases": cases,
        "property_oracles": oracles,
        "strength": score,
        "warnings": warnings,
    }
    if problems:
        return Outcome(FAIL_CLOSED, "; ".join(problems), evidence)
    ownership = f"warning: {warnings[0]}" if warnings else "protected paths owned"
    return Outcome(
        PASS,
        f"offline, {len(config.model_variables)} model variables unset, {MATRIX} names every "
        f"step, {ownership}, {cases} cases and {len(oracles)} property oracle files",
        evidence,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--tree", type=Path, default=Path("."), help="the base tree")
    p.add_argument("--patch-tree", type=Path, help="the head tree (its `tests:` are checked)")
    p.add_argument("--strength", type=Path, help="strength.json from the oracle ref, if any")
    add_report_arg(p, "preconditions")
    return p


STEP = Contract("preconditions", parser, from_args, inputs, decide)
