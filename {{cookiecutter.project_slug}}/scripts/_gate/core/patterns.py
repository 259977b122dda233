"""CODEOWNERS and gitignore-style path patterns, as `protected:` in judge.yaml uses them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path


@cache
def pattern_regex(pattern: str) -> re.Pattern[str]:
    """Translate a CODEOWNERS / gitignore-style pattern into a regex over POSIX paths.

    A leading or inner slash anchors the pattern at the root; a trailing slash means
    "everything below"; `*` stays within one segment and `**` crosses segments.
    """
    anchored = pattern.startswith("/") or "/" in pattern.rstrip("/")
    directory = pattern.endswith("/")
    body = pattern.strip("/")
    out = []
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            char = body[i]
            out.append({"*": "[^/]*", "?": "[^/]"}.get(char, re.escape(char)))
            i += 1
    prefix = "" if anchored else "(?:.*/)?"
    suffix = "/.+" if directory else "(?:/.+)?"
    return re.compile(f"{prefix}{''.join(out)}{suffix}")


def matches(path: str, patterns: Iterable[str]) -> str | None:
    return next((p for p in patterns if pattern_regex(p).fullmatch(path)), None)


CODEOWNERS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")  # GitHub's order
# The template's default answer for `owners`: a handle of no one's organisation.
PLACEHOLDER_OWNER = "@org/maintainers"
Rule = tuple[str, list[str]]  # a CODEOWNERS pattern and its owners


def codeowners(tree: Path) -> tuple[str, list[Rule]] | None:
    """The CODEOWNERS file GitHub reads in `tree` (its path) and its rules, in order."""
    found = next((tree / p for p in CODEOWNERS if (tree / p).is_file()), None)
    if found is None:
        return None
    lines = [line.split() for line in found.read_text("utf-8", "replace").splitlines()]
    rules = [(line[0], line[1:]) for line in lines if line and not line[0].startswith("#")]
    return found.relative_to(tree).as_posix(), rules


def owners(rules: Sequence[Rule], path: str) -> list[str]:
    """Who owns `path`: the owners of the last rule that matches it, as GitHub decides."""
    return next((who for pattern, who in reversed(rules) if matches(path, [pattern])), [])


def placeholder(who: Sequence[str]) -> bool:
    """Owners that are only the template's placeholder: nobody is asked to review."""
    return bool(who) and set(who) <= {PLACEHOLDER_OWNER}
