"""Run-time check counts: what the tests' checks did when they ran, parent's tests against the
patch's, both on the patch build (docs/assertion-probes.md).

The evidence plugin lists, per test id, each check that ran and passed, as a digest of the
values it compared (pytest_evidence.py). The parent's tests ran on the patch build in the
crossrun; the patch's tests run there too, in the inventory. On one build, only the tests
differ, so:

- a test (a family of parametrized ids, a renamed test with the one it became) whose checks
  that ran dropped blocks (`fewer-checks`), even where the AST counts agree: a check that no
  longer runs, a skip taken at run time, an early exit;
- a test the AST calls deleted is moved when every check it ran, with the same values, runs in
  a test the patch added (a parametrize collapse, a test ported to another file in a new
  style): the AST finding is set aside, and the report says run-time checks decided;
- an AST finding of fewer assertions in a test, of an id no longer collected, of a lower
  total, or of a skip the test gained, is set aside where every check that ran on the
  parent's version runs, with the same values, on the patch's (two sites folded into one
  parametrized check; a skip whose condition is false here);
- an AST finding of a check that cannot fail because it compares one object with itself is
  set aside where it ran on an object whose type has its own `__eq__` from the build.

A patch's test that fails or errors is not compared: its failure is a signal of its own (the
advisory tests), and a failing test stops early.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from _gate.inventory.probes import family

# AST rules the checks that ran can set aside, and those they never can (a weakened check
# still runs; an outcome hook is the AST's to see). A skipif-style decorator the patch adds
# is set aside where its test ran and passed every check of its parent's version, with the
# same values: its condition does not hold where the judge runs it (`skipif(<an old
# SQLite>)`), and the report still names it; a skip taken at run time leaves the test
# skipped, and stands; a skip call or a setUp skip is never set aside.
# A check the AST calls vacuous because it compares one object with itself is set aside where
# it ran on an object whose type has its own `__eq__` from the build (`assertEqual(r, r)`
# tests numeric_range's `__eq__`); the same spelling on an int, or on a class the tests
# define, stands.
REFUTABLE = frozenset(
    {
        "deleted-test",
        "deleted-file",
        "fewer-asserts",
        "not-collected",
        "total-drop",
        "skip-added",
        "vacuous",
    }
)


@dataclass(frozen=True)
class Ran:
    """One run's checks by test family, and which families passed whole."""

    checks: dict[str, Counter[str]]
    passed: frozenset[str]
    reflexive: dict[str, frozenset[str]] = field(default_factory=dict)  # family -> file:line

    @classmethod
    def of(
        cls,
        outcomes: Mapping[str, str],
        checks: Mapping[str, Iterable[str]],
        reflexive: Mapping[str, Iterable[str]] | None = None,
    ) -> Ran:
        found: dict[str, Counter[str]] = {}
        status: dict[str, bool] = {}
        lines: dict[str, set[str]] = {}
        reflexive = reflexive or {}
        for node, outcome in outcomes.items():
            name = family(node)
            found.setdefault(name, Counter()).update(checks.get(node, ()))
            status[name] = status.get(name, True) and outcome == "passed"
            lines.setdefault(name, set()).update(reflexive.get(node, ()))
        passed = frozenset(name for name, ok in status.items() if ok)
        return cls(found, passed, {name: frozenset(s) for name, s in lines.items() if s})

    def count(self, name: str) -> int:
        return sum(self.checks.get(name, Counter()).values())


@dataclass
class Decided:
    """What the checks that ran decided: new findings, AST findings set aside, moved tests."""

    findings: list[dict[str, Any]] = field(default_factory=list)
    set_aside: list[dict[str, Any]] = field(default_factory=list)
    moved: dict[str, list[str]] = field(default_factory=dict)  # deleted test -> tests it runs in


def compare(
    parent: Ran, patch: Ran, pairs: Mapping[str, str], findings: Iterable[dict[str, Any]]
) -> Decided:
    """The patch's tests against the parent's, both on the patch build. `pairs`: parent test
    -> the patch test the AST compared it with (renamed, moved); `findings`: the AST's."""
    decided = Decided()
    for name in sorted(parent.checks):
        now = pairs.get(name, name)
        if now not in patch.checks or now not in patch.passed:
            continue
        before, after = parent.count(name), patch.count(now)
        if after < before and name in parent.passed:
            path = now.split("::", 1)[0]
            why = f"{now} ran {after} of the {before} checks its parent's version ran"
            decided.findings.append(
                {"rule": "fewer-checks", "id": now, "path": path, "line": 0, "reason": why}
            )
    decided.moved = ported(parent, patch, pairs)
    decided.set_aside = [
        found for found in findings if refuted(found, parent, patch, pairs, decided)
    ]
    return decided


def ported(parent: Ran, patch: Ran, pairs: Mapping[str, str]) -> dict[str, list[str]]:
    """Each parent test the patch no longer has whose checks all run, with the same values, in
    tests the patch added: the new tests it moved to."""
    added = [name for name in patch.checks if name not in parent.checks and name in patch.passed]
    pool = Counter[str]()
    owners: dict[str, list[str]] = {}
    for name in added:
        pool.update(patch.checks[name])
        for value in patch.checks[name]:
            owners.setdefault(value, []).append(name)
    moved = {}
    gone = [n for n in sorted(parent.checks) if pairs.get(n, n) not in patch.checks]
    for name in gone:
        need = parent.checks[name]
        if not need or any(pool[value] < count for value, count in need.items()):
            continue
        pool.subtract(need)
        moved[name] = sorted({owner for value in need for owner in owners[value]})
    return moved


def holds(big: Counter[str], small: Counter[str]) -> bool:
    """Whether every check of `small` is in `big`, as many times: the same checks, same values."""
    return bool(small) and all(big[value] >= count for value, count in small.items())


def refuted(
    found: Mapping[str, Any],
    parent: Ran,
    patch: Ran,
    pairs: Mapping[str, str],
    decided: Decided,
) -> bool:
    """Whether the checks that ran set this AST finding aside. None is while a test's checks
    that ran dropped: that finding stands, and so do the AST's."""
    rule, test = found["rule"], family(str(found.get("id", "")))
    if rule not in REFUTABLE or decided.findings:
        return False
    if rule == "skip-added" and not found.get("conditional"):
        return False  # a skip call or a hook: the AST's to see
    if rule == "vacuous":
        return reflexive(found, patch, pairs.get(test, test))
    if rule == "deleted-file":
        path = str(found["path"])
        gone = [name for name in parent.checks if name.split("::", 1)[0] == path]
        return bool(gone) and all(name in decided.moved for name in gone)
    if rule == "total-drop":
        return sum(map(patch.count, patch.checks)) >= sum(map(parent.count, parent.checks))
    if test in decided.moved:
        return True
    now = pairs.get(test, test)
    kept = rule != "deleted-test" and now in patch.passed
    return kept and holds(patch.checks.get(now, Counter()), parent.checks.get(test, Counter()))


def reflexive(found: Mapping[str, Any], patch: Ran, test: str) -> bool:
    """Whether the vacuous checks the patch added to `test` are, all but as many as its
    parent's version held, checks that ran comparing an object with its own `__eq__`
    (one per line: the plugin lists a line, not each check on it)."""
    if test not in patch.passed or "counts" not in found:
        return False
    before, after = (int(n) for n in found["counts"])
    ran = patch.reflexive.get(test, frozenset())
    lines = {line for line in found["same_sides"] if f"{found['path']}:{line}" in ran}
    return after - len(lines) <= before
