"""PEP 508 environment markers (`greenlet ; python_version < "3.11"`), evaluated for the
interpreter the judge runs: a requirement whose marker is false here is not one the tests
need here. The standard library has no evaluator and scripts/ imports only it and PyYAML, so
this one covers what requirement files write: the marker variables, `and`, `or`,
parentheses, comparisons of versions and of strings, `in` and `not in`. A marker it cannot
read applies (the requirement stays needed: fail closed)."""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Callable

TOKEN = re.compile(
    r"""\s*(?:(?P<string>'[^']*'|"[^"]*")|(?P<op>===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b)"""
    r"""|(?P<word>and\b|or\b|\(|\))|(?P<name>[a-z_]+))"""
)
VERSIONS = frozenset({"python_version", "python_full_version", "implementation_version"})


def variables() -> dict[str, str]:
    info = sys.implementation.version
    return {
        "os_name": os.name,
        "sys_platform": sys.platform,
        "platform_machine": platform.machine(),
        "platform_python_implementation": platform.python_implementation(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "python_full_version": platform.python_version(),
        "implementation_name": sys.implementation.name,
        "implementation_version": f"{info.major}.{info.minor}.{info.micro}",
        "extra": "",
    }


def applies(requirement: str) -> bool:
    """Whether a requirement row applies to this interpreter (no marker: it does)."""
    _, sep, marker = requirement.partition(";")
    if not sep or not marker.strip():
        return True
    try:
        return evaluate(marker, variables())
    except (ValueError, IndexError, KeyError):
        return True


def evaluate(marker: str, env: dict[str, str]) -> bool:
    tokens = tokenize(marker)
    value, rest = disjunction(tokens, env)
    if rest:
        raise ValueError(f"unexpected {rest[0]!r} in marker {marker!r}")
    return value


Token = tuple[str, str]  # kind, text


def tokenize(marker: str) -> list[Token]:
    tokens, at = [], 0
    while marker[at:].strip():
        found = TOKEN.match(marker, at)
        if not found or found.lastgroup is None:
            raise ValueError(f"cannot read marker {marker!r} at {at}")
        tokens.append((found.lastgroup, " ".join(found.group(found.lastgroup).split())))
        at = found.end()
    return tokens


Part = Callable[[list[Token], dict[str, str]], tuple[bool, list[Token]]]


def disjunction(tokens: list[Token], env: dict[str, str]) -> tuple[bool, list[Token]]:
    return joined(tokens, env, "or", conjunction)


def conjunction(tokens: list[Token], env: dict[str, str]) -> tuple[bool, list[Token]]:
    return joined(tokens, env, "and", atom)


def joined(
    tokens: list[Token], env: dict[str, str], word: str, part: Part
) -> tuple[bool, list[Token]]:
    """`part (word part)*`: `and` binds tighter than `or`."""
    value, rest = part(tokens, env)
    while rest and rest[0] == ("word", word):
        right, rest = part(rest[1:], env)
        value = (value or right) if word == "or" else (value and right)
    return value, rest


def atom(tokens: list[Token], env: dict[str, str]) -> tuple[bool, list[Token]]:
    if tokens[0] == ("word", "("):
        value, rest = disjunction(tokens[1:], env)
        if not rest or rest[0] != ("word", ")"):
            raise ValueError("unbalanced parentheses in marker")
        return value, rest[1:]
    (left_kind, left), (op_kind, op), (right_kind, right) = tokens[:3]
    if op_kind != "op":
        raise ValueError(f"expected a comparison, got {op!r}")
    versions = VERSIONS & {left, right}
    a, b = side(left_kind, left, env), side(right_kind, right, env)
    return compare(a, op, b, bool(versions)), tokens[3:]


def side(kind: str, text: str, env: dict[str, str]) -> str:
    if kind == "string":
        return text[1:-1]
    if kind == "name" and text in env:
        return env[text]
    raise ValueError(f"unknown marker variable {text!r}")


def compare(a: str, op: str, b: str, versions: bool) -> bool:
    if op in ("in", "not in"):
        return (a in b) == (op == "in")
    if not versions or op == "===":
        return {"==": a == b, "===": a == b, "!=": a != b}[op]
    if op in ("==", "!=") and b.endswith(".*"):  # a prefix: `python_version == "3.*"`
        prefix = version(b[:-2])
        return (version(a)[: len(prefix)] == prefix) == (op == "==")
    x, y = version(a), version(b)
    width = max(len(x), len(y))  # `3.11` is `3.11.0`
    x, y = x + (0,) * (width - len(x)), y + (0,) * (width - len(y))
    if op == "~=":  # compatible: at least b, same release but its last part
        return x >= y and x[: len(version(b)) - 1] == y[: len(version(b)) - 1]
    return {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def version(text: str) -> tuple[int, ...]:
    """A release version as numbers (`3.11.7`); anything else is not read."""
    parts = text.strip().split(".")
    if not all(p.isdigit() for p in parts):
        raise ValueError(f"not a release version: {text!r}")
    return tuple(int(p) for p in parts)
