"""Assertion sites, parent against patch: what each one checks, and whether a patch weakened it.

A site is `[line, text]` from _inventory.py: the normalized source of one `assert` statement or
one assertion call. Only sites of tests that changed are classified here, so a warm run of an
unchanged suite never parses one.
"""

from __future__ import annotations

import ast
import builtins
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

EQ, CLOSE, RAISES, OTHER = "equality", "tolerance", "raises", "other"
# What an equality (or a tolerance) may not turn into at the same site.
WEAKER = {
    "truthy": "a truthiness check",
    "not-none": "an `is not None` check",
    "ne": "an inequality",
    "isinstance": "a type check",
    "bound": "a bound",
}
EQUAL_CALLS = frozenset(
    {"assertEqual", "assertEquals", "assertIs", "assertListEqual", "assertDictEqual"}
    | {"assertTupleEqual", "assertSetEqual", "assertSequenceEqual", "assertMultiLineEqual"}
    | {"assert_equal", "assert_array_equal"}
)
ONE_ARG = {"assertTrue": "truthy", "assert_": "truthy", "assertIsNotNone": "not-none"}
TWO_ARGS = {
    "assertNotEqual": "ne",
    "assertIsInstance": "isinstance",
    "assertGreater": "bound",
    "assertGreaterEqual": "bound",
    "assertLess": "bound",
    "assertLessEqual": "bound",
}
# Tolerance arguments: positional index after the two values, default, and which way is weaker.
TOLERANCES: dict[str, dict[str, tuple[int, float, int]]] = {
    "approx": {"rel": (1, 1e-6, 1), "abs": (2, 1e-12, 1)},
    "isclose": {"rel_tol": (-1, 1e-9, 1), "abs_tol": (-1, 0.0, 1)},
    "assert_allclose": {"rtol": (2, 1e-7, 1), "atol": (3, 0.0, 1)},
    "assertAlmostEqual": {"places": (2, 7, -1), "delta": (-1, 0.0, 1)},
    "assertAlmostEquals": {"places": (2, 7, -1), "delta": (-1, 0.0, 1)},
    "assert_almost_equal": {"decimal": (2, 7, -1)},
}
RAISE_CALLS = frozenset({"raises", "assertRaises", "assertRaisesRegex", "warns", "assertWarns"})
UNKNOWN = float("nan")


def dotted_last(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


@dataclass(frozen=True)
class Site:
    line: int
    text: str
    key: str  # what the site checks (its first operand): sites are aligned on it
    kind: str = OTHER
    subjects: frozenset[str] = frozenset()
    tolerance: tuple[tuple[str, float, int], ...] = ()  # (name, value, weaker direction)
    exception: str = ""
    match: bool = False

    @property
    def exact(self) -> bool:
        return self.kind in (EQ, CLOSE)


def site(line: int, text: str) -> Site:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return Site(line, text, text)  # a comment inside a multi-line call: text only
    stmt = tree.body[0] if tree.body else None
    if isinstance(stmt, ast.Assert):
        return asserted(line, text, stmt.test)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return called(line, text, stmt.value)
    return Site(line, text, text)


def src(node: ast.AST) -> str:
    return ast.unparse(node)


def asserted(line: int, text: str, test: ast.expr) -> Site:
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return compared(line, text, test.ops[0], test.left, test.comparators[0])
    if isinstance(test, ast.Call):
        name = dotted_last(test.func)
        if name == "isinstance" and test.args:
            first = src(test.args[0])
            return Site(line, text, first, "isinstance", frozenset({first}))
        if name in TOLERANCES:
            return tolerant(line, text, test, name)
    if isinstance(test, (ast.BoolOp, ast.UnaryOp)):
        return Site(line, text, src(test))
    return Site(line, text, src(test), "truthy", frozenset({src(test)}))


def compared(line: int, text: str, op: ast.cmpop, left: ast.expr, right: ast.expr) -> Site:
    key, sides = src(left), frozenset({src(left), src(right)})
    for one, other in ((right, left), (left, right)):
        if (
            isinstance(one, ast.Call)
            and dotted_last(one.func) == "approx"
            and isinstance(op, ast.Eq)
        ):
            found = tolerant(line, text, one, "approx")
            subjects = found.subjects | {src(other)}
            return Site(line, text, key, CLOSE, subjects, found.tolerance)
    if isinstance(op, (ast.Eq, ast.Is)):
        return Site(line, text, key, EQ, sides)
    if isinstance(op, ast.IsNot) and isinstance(right, ast.Constant) and right.value is None:
        return Site(line, text, key, "not-none", frozenset({key}))
    if isinstance(op, ast.NotEq):
        return Site(line, text, key, "ne", sides)
    if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
        return Site(line, text, key, "bound", sides)
    return Site(line, text, key, OTHER, sides)


def number(node: ast.AST | None, default: float) -> float:
    if node is None:
        return default
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return UNKNOWN
    return float(value) if isinstance(value, (int, float)) else UNKNOWN


def tolerant(line: int, text: str, call: ast.Call, name: str) -> Site:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    given: list[tuple[str, float, int]] = []
    for key, (position, default, weaker) in TOLERANCES[name].items():
        node = keywords.get(key)
        if node is None and 0 <= position < len(call.args):
            node = call.args[position]
        given.append((key, number(node, default), weaker))
    subjects = [src(a) for a in call.args[: 1 if name == "approx" else 2]]
    key = subjects[0] if subjects else text
    return Site(line, text, key, CLOSE, frozenset(subjects), tuple(given))


def called(line: int, text: str, call: ast.Call) -> Site:
    name = dotted_last(call.func)
    args = [src(a) for a in call.args]
    key = args[0] if args else text
    if name in EQUAL_CALLS and len(args) >= 2:
        return Site(line, text, key, EQ, frozenset(args[:2]))
    if name in ONE_ARG and args:
        return Site(line, text, key, ONE_ARG[name], frozenset(args[:1]))
    if name in TWO_ARGS and len(args) >= 2:
        return Site(line, text, key, TWO_ARGS[name], frozenset(args[:2]))
    if name in TOLERANCES:
        return tolerant(line, text, call, name)
    if name in RAISE_CALLS:
        keywords = {k.arg for k in call.keywords}
        match = "match" in keywords or name.endswith("Regex")
        exception = args[0] if args else ""
        return Site(line, text, RAISES, RAISES, frozenset(), (), exception, match)
    return Site(line, text, key)


def broader(new: str, old: str) -> bool:
    """`new` catches more than `old`: a builtin superclass of it, or Exception itself."""
    if new == old:
        return False
    new_class = getattr(builtins, new.rsplit(".", 1)[-1], None)
    old_class = getattr(builtins, old.rsplit(".", 1)[-1], None)
    if not isinstance(new_class, type) or not issubclass(new_class, BaseException):
        return False
    if isinstance(old_class, type) and issubclass(old_class, BaseException):
        return new_class in old_class.__mro__
    return new_class in (Exception, BaseException)  # a project's own exception class


def weaker_tolerance(old: Site, new: Site) -> str:
    before = {name: value for name, value, _weaker in old.tolerance}
    for name, value, weaker in new.tolerance:
        was = before.get(name)
        if was is None:
            continue  # another tolerance function: judged by kind and subject only
        unknown = math.isnan(value) and not math.isnan(was)  # a literal became a variable
        if unknown or (value - was) * weaker > 0:
            return f"{name} went from {was:g} to {value:g}"
    return ""


def weakening(old: Site, new: Site) -> str:
    """Why `new` checks less than `old` at the same site, or ''."""
    shared = bool(old.subjects & new.subjects)
    if old.exact and new.kind in WEAKER and shared:
        return f"an exact check became {WEAKER[new.kind]}"
    if old.kind == EQ and new.kind == CLOSE and shared:
        explicit = any(value != default(name) for name, value, _w in new.tolerance)
        return "an exact equality became a tolerance" if explicit else ""
    if old.kind == CLOSE and new.kind == CLOSE and shared:
        return weaker_tolerance(old, new)
    if old.kind == RAISES and new.kind == RAISES:
        if broader(new.exception, old.exception):
            return f"expects {new.exception} where it expected {old.exception}"
        if old.match and not new.match:
            return "no longer checks the exception's message"
    return ""


def default(name: str) -> float:
    for table in TOLERANCES.values():
        if name in table:
            return table[name][1]
    return UNKNOWN


def pairs(
    before: Sequence[Site], after: Sequence[Site]
) -> tuple[list[tuple[Site, Site]], list[Site], list[Site]]:
    """Pair two tests' sites by order and by what they check (their first operand, so that an
    edited site still meets its old self), then let a site whose text survives elsewhere in the
    test keep its twin. Returns ([(old, new) changed pairs], lost, gained)."""
    matcher = SequenceMatcher(None, [s.key for s in before], [s.key for s in after], False)
    changed: list[tuple[Site, Site]] = []
    lost: list[Site] = []
    gained: list[Site] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        olds, news = list(before[i1:i2]), list(after[j1:j2])
        if tag == "equal":
            changed += [
                (old, new) for old, new in zip(olds, news, strict=True) if old.text != new.text
            ]
            continue
        for old in olds:
            partner = next((n for n in news if old.subjects & n.subjects), None)
            if partner is None and old.kind == RAISES:
                partner = next((n for n in news if n.kind == RAISES), None)
            if partner is None:
                lost.append(old)
            else:
                news.remove(partner)
                changed.append((old, partner))
        gained += news
    return twins(changed, lost, gained)


def twins(
    changed: list[tuple[Site, Site]], lost: list[Site], gained: list[Site]
) -> tuple[list[tuple[Site, Site]], list[Site], list[Site]]:
    """An assertion added next to an unchanged one with the same operand is an addition, not an
    edit of it: re-pair a changed pair whose old text the test still holds unchanged."""
    kept = []
    for old, new in changed:
        twin = next((g for g in gained if g.text == old.text), None)
        if twin is not None:
            gained[gained.index(twin)] = new
            continue
        twin = next((g for g in lost if g.text == new.text), None)
        if twin is not None:
            lost[lost.index(twin)] = old
            continue
        kept.append((old, new))
    common = Counter(g.text for g in gained) & Counter(g.text for g in lost)
    return kept, without(lost, common), without(gained, common)


def without(found: Sequence[Site], texts: Counter[str]) -> list[Site]:
    """`found` less the given number of sites of each text."""
    left = Counter(texts)
    out = []
    for one in found:
        if left[one.text] > 0:
            left[one.text] -= 1
        else:
            out.append(one)
    return out
