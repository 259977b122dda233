"""CODEOWNERS and gitignore-style path patterns, as `protected:` in judge.yaml uses them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache


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
