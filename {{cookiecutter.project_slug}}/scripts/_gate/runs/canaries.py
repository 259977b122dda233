"""Canaries for a pytest run that imports the code under test (the crossrun): planted tests
that must fail and tests that must pass, and the check of what they did.

The patch's package is imported into the crossrun's pytest process, where a few lines can
patch pytest to turn failures into passes. Each run gets a fresh canary module, written into
its private copy of the base tree beside one of the base's own test modules, named in the same
style from words of the base's own test names, random per run: one plain-assert test that
fails and one that passes, and a `unittest.TestCase` of each kind when the base has unittest
tests. The evidence plugin keeps their outcomes apart from the base's tests
(scripts/_gate/plugin/pytest_evidence.py) and reports them, with what changed in pytest's machinery
(scripts/_gate/plugin/tamper.py), in a file of its own. `check` names the first thing wrong: a
canary with the wrong outcome or missing, changed machinery, or an evidence file rewritten
after the session.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _gate.core.protocol import Tampered
from _gate.plugin.tamper import digest

STYLES = (re.compile(r"^test_.*\.py$"), re.compile(r"^.*_test\.py$"))
NAMES = re.compile(r"\bdef (test_\w+)")
# Words for names when the base's own test names have too few.
SPARE = ("total", "order", "value", "empty", "rounding", "limit", "default", "parse", "update")
PASS, FAIL = "passed", "failed"


@dataclass(frozen=True)
class Planted:
    """A canary module written into a run's tree, and where the plugin reports on it."""

    spec: Path  # the file the plugin reads (and removes) as pytest starts
    report: Path  # the file it writes at the end of the session
    expected: dict[str, str]  # node id -> the outcome it must have

    def option(self) -> str:
        return f"--oracle-canaries={self.spec}"


def test_modules(root: Path, targets: Sequence[str]) -> list[Path]:
    """The base's test modules the run's targets hold (a folder's, or a file named)."""
    found: list[Path] = []
    for target in targets:
        path = root / target.split("::", 1)[0]
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            files = sorted(p for p in path.rglob("*.py") if any(s.match(p.name) for s in STYLES))
            found += files
    return found


def words(modules: Sequence[Path]) -> list[str]:
    """The words of the base's test names: canaries are named from them."""
    found: set[str] = set()
    for module in modules:
        for name in NAMES.findall(module.read_text("utf-8", "replace")):
            found |= {w for w in name.split("_")[1:] if w.isalpha() and len(w) > 2}
    return sorted(found) if len(found) >= 6 else sorted(found | set(SPARE))


class Namer:
    """Fresh names from the base's words, never one the tree already uses."""

    def __init__(self, rng: random.Random, vocabulary: Sequence[str], taken: set[str]) -> None:
        self.rng, self.vocabulary, self.taken = rng, vocabulary, taken

    def words(self) -> list[str]:
        while True:
            picked = self.rng.sample(self.vocabulary, k=self.rng.choice((2, 3)))
            if "_".join(picked) not in self.taken:
                self.taken.add("_".join(picked))
                return picked

    def function(self) -> str:
        return "test_" + "_".join(self.words())


def module_name(beside: Path, namer: Namer, root: Path) -> Path:
    """A module beside `beside`, named in its style (`test_x.py`, `x_test.py`, `check_x.py`),
    its name used by no other module of the tree (pytest's default import mode needs that)."""
    used = {p.name for p in root.rglob("*.py")}
    while True:
        stem = "_".join(namer.words())
        if beside.stem.endswith("_test"):
            name = f"{stem}_test.py"
        else:
            name = f"{beside.stem.split('_', 1)[0]}_{stem}.py"
        if name not in used:
            return beside.with_name(name)


def plain_tests(namer: Namer, rng: random.Random) -> list[tuple[str, str, str]]:
    """(name, outcome, source) of the plain-assert canaries: sums of a few random numbers."""
    rows = []
    for outcome in (PASS, FAIL):
        numbers = [rng.randint(2, 999) for _ in range(rng.randint(2, 4))]
        total = sum(numbers) + (0 if outcome == PASS else rng.randint(1, 9))
        name = namer.function()
        body = f"    values = {numbers!r}\n    assert sum(values) == {total}\n"
        rows.append((name, outcome, f"def {name}() -> None:\n{body}"))
    return rows


def unittest_tests(namer: Namer, rng: random.Random) -> tuple[str, list[tuple[str, str]], str]:
    """A TestCase with a passing and a failing canary: (class, [(method, outcome)], source)."""
    cls = "".join(w.capitalize() for w in namer.words()) + "Test"
    methods, lines = [], [f"class {cls}(unittest.TestCase):"]
    for outcome in (PASS, FAIL):
        left, right = rng.randint(2, 99), rng.randint(2, 99)
        product = left * right + (0 if outcome == PASS else rng.randint(1, 9))
        name = namer.function()
        methods.append((name, outcome))
        lines += [
            f"    def {name}(self) -> None:",
            f"        self.assertEqual({left} * {right}, {product})",
            "",
        ]
    return cls, methods, "\n".join(lines)


def canary_module(
    namer: Namer, rng: random.Random, rel: str, with_unittest: bool
) -> tuple[str, dict[str, str]]:
    """The canary module's source, and its node ids with the outcome each must have."""
    expected: dict[str, str] = {}
    parts = []
    for name, outcome, source in plain_tests(namer, rng):
        expected[f"{rel}::{name}"] = outcome
        parts.append(source)
    if with_unittest:
        cls, methods, source = unittest_tests(namer, rng)
        expected |= {f"{rel}::{cls}::{name}": outcome for name, outcome in methods}
        parts.append(source)
    rng.shuffle(parts)
    head = "import unittest\n\n\n" if with_unittest else ""
    return head + "\n\n".join(parts), expected


def plant(root: Path, targets: Sequence[str], scratch: Path) -> Planted:
    """Write a canary module into the run's tree `root` and the plugin's file into `scratch`
    (outside the tree); the module goes beside a random test module of the targets."""
    rng = random.SystemRandom()
    modules = test_modules(root, targets)
    folder = root / targets[0].split("::", 1)[0] if targets else root
    beside = rng.choice(modules) if modules else folder / "test_x.py"
    texts = [m.read_text("utf-8", "replace") for m in modules]
    namer = Namer(rng, words(modules), {n for text in texts for n in NAMES.findall(text)})
    path = module_name(beside, namer, root)
    rel = path.relative_to(root).as_posix()
    source, expected = canary_module(namer, rng, rel, any("TestCase" in t for t in texts))
    path.write_text(source, "utf-8")
    # A module no folder target holds is collected as if named (the plugin adds it): a root
    # test.py, or one test id of a retry.
    held = any(path.is_relative_to(root / t) for t in targets if (root / t).is_dir())
    spec, report = scratch / "canaries.json", scratch / "canary-report.json"
    data = {"expected": expected, "files": [rel], "report": str(report)}
    data["args"] = [] if held else [str(path)]
    spec.write_text(json.dumps(data), "utf-8")
    return Planted(spec, report, expected)


def check(planted: Planted, outcomes: dict[str, str]) -> None:
    """Raise Tampered naming the first thing wrong with a run that left `outcomes`."""
    try:
        report = json.loads(planted.report.read_bytes())
        got, changed = dict(report["canaries"]), list(report["tampered"])
        written = str(report["digest"])
    except (OSError, ValueError, KeyError, TypeError):
        raise Tampered("the evidence plugin wrote no canary report") from None
    for node, must in sorted(planted.expected.items()):
        outcome, verb = got.get(node, "missing"), must.removesuffix("ed")
        if outcome == "missing":
            raise Tampered(f"canary {node} is missing (it must {verb})")
        if outcome != must:
            raise Tampered(f"canary {node} {outcome} but must {verb}")
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise Tampered(f"pytest's machinery changed during the run: {changed[0]}{more}")
    if written != digest(outcomes):
        raise Tampered("the evidence file changed after the plugin wrote it")
