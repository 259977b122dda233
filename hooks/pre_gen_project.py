"""Validate every cookiecutter answer before anything is written.

Each broken answer prints one line naming the answer and the rule, and the bake stops. The
answers arrive as JSON (rendered with `tojson`), so this file is also plain Python that tests
import and call with a dict.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

ANSWERS = r"""{{ cookiecutter | tojson }}"""

SLUG = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
COMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
OWNER = re.compile(
    r"@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:/[A-Za-z0-9._-]+)?|[^@\s]+@[^@\s]+\.[^@\s]+"
)
REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def ref_problem(ref: str) -> str | None:
    """git check-ref-format rules for a branch name, checked without git."""
    if not ref or ref == "@" or REF_FORBIDDEN.search(ref):
        return "no spaces, control characters, ~ ^ : ? * [ \\, '..', '@{' or '//'"
    if ref.startswith(("/", "-")) or ref.endswith(("/", ".")):
        return "must not start with '/' or '-', nor end with '/' or '.'"
    if any(part.startswith(".") or part.endswith(".lock") for part in ref.split("/")):
        return "no component may start with '.' or end with '.lock'"
    return None


def integer(low: int, high: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        try:
            number = int(str(value))
        except ValueError:
            return f"a whole number from {low} to {high}"
        return None if low <= number <= high else f"a whole number from {low} to {high}"

    return check


def cv_bound(value: Any) -> str | None:
    try:
        number = float(str(value))
    except ValueError:
        return "a number greater than 0 and at most 5"
    return None if 0 < number <= 5 else "a number greater than 0 and at most 5"


def one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda value: None if value in choices else f"one of {', '.join(choices)}"


def matching(pattern: re.Pattern[str], rule: str) -> Callable[[Any], str | None]:
    return lambda value: None if pattern.fullmatch(str(value)) else rule


def identifier(value: Any) -> str | None:
    text = str(value)
    if text.isidentifier() and text.isascii() and not keyword.iskeyword(text):
        return None
    return "a Python identifier (ASCII letters, digits, '_'; not a keyword)"


def owners(value: Any) -> str | None:
    handles = str(value).split()
    if handles and all(OWNER.fullmatch(h) for h in handles):
        return None
    return "space-separated CODEOWNERS handles such as @org/team, @user or an email"


def project_name(value: Any) -> str | None:
    text = str(value)
    return None if text.strip() and len(text) <= 200 else "non-empty text of at most 200 characters"


RULES: dict[str, Callable[[Any], str | None]] = {
    "project_name": project_name,
    "project_slug": matching(SLUG, "lowercase letters and digits in '-'-separated words"),
    "package_name": identifier,
    "cli_command": matching(
        COMMAND, "letters, digits, '.', '_' or '-', starting with a letter or digit"
    ),
    "owners": owners,
    "base_branch": lambda v: ref_problem(str(v)),
    "oracle_ref": lambda v: ref_problem(str(v)),
    "include_example": one_of("yes", "no"),
    "ci": one_of("github", "none"),
    "variance_runs": integer(2, 50),
    "duration_cv_max": cv_bound,
    "flake_max_retry": integer(0, 5),
    "judge_shards": integer(1, 16),
}


def validate(answers: Mapping[str, Any]) -> list[str]:
    """One line per broken answer: the answer, its value, and the rule it breaks."""
    errors = [
        f"answer {name}={answers.get(name)!r} is invalid: must be {problem}"
        for name, rule in RULES.items()
        if (problem := rule(answers.get(name, "")))
    ]
    base, ref = str(answers.get("base_branch")), str(answers.get("oracle_ref"))
    if base == ref or ref.startswith(base + "/") or base.startswith(ref + "/"):
        errors.append(
            f"answer oracle_ref={ref!r} is invalid: must differ from base_branch={base!r} "
            "and not nest inside it (git cannot hold both refs)"
        )
    return errors


def main() -> int:
    errors = validate(json.loads(ANSWERS))
    for line in errors:
        print(f"oracle-template: {line}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
