"""Validate every cookiecutter answer before anything is written, and save the user's work.

Each broken answer prints one line naming the answer, its value and the rule, and the bake
stops. The answers arrive as JSON (rendered with `tojson`), so this file is also plain Python
that tests import and call with a dict.

Over an existing repository (`cookiecutter --replay -f`) the bake must only add files: this hook
saves what the user has on disk into a private index under `.git/`, and post_gen_project.py puts
back every file of the user's the bake changed or removed.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

ANSWERS = r"""{{ cookiecutter | tojson }}"""
# Under the repository's git dir; post_gen_project.py reads it back and removes it.
STATE = "oracle-template"
GIT_REQUIRED = "git is required to bake (ref names, git init, oracle ref); install git"

SLUG = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
COMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
OWNER = re.compile(
    r"@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:/[A-Za-z0-9._-]+)?|[^@\s]+@[^@\s]+\.[^@\s]+"
)
REF_RULE = (
    "a branch name git accepts (`git check-ref-format --branch`: no spaces, control characters,"
    " ~ ^ : ? * [ \\, '..', '@{' or '//'; no leading '-'; no component starting with '.' or"
    " ending in '.lock'; no trailing '/' or '.'), and not HEAD or '@'"
)


def git(root: Path, *args: str, env: Mapping[str, str] | None = None) -> bytes:
    proc = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def ref_problem(ref: str) -> str | None:
    """Git decides what a branch name is. `--branch` also expands `@{-N}` to the branch checked
    out N switches ago (so a name git prints back changed is refused); HEAD and '@' mean the
    current commit in revision syntax, and a leading '-' reads as an option: all refused."""
    if ref in ("HEAD", "@") or ref.startswith("-") or "\0" in ref:
        return REF_RULE
    proc = subprocess.run(
        ["git", "check-ref-format", "--branch", ref], capture_output=True, text=True
    )
    return None if proc.returncode == 0 and proc.stdout == f"{ref}\n" else REF_RULE


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
    "_variance_runs": integer(2, 50),
    "_duration_cv_max": cv_bound,
    "_flake_max_retry": integer(0, 5),
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


def template_paths(answers: Mapping[str, Any]) -> list[str] | None:
    """The project's paths a bake writes: the template's files with their names rendered, and
    the fixture lock the post-gen hook writes. None where cookiecutter names no template folder
    (`_repo_dir`: cruft's bakes)."""
    repo = answers.get("_repo_dir")
    # The project folder is the one whose name is a template (cookiecutter.json is a file).
    folders = Path(repo).iterdir() if repo and Path(repo).is_dir() else ()
    source = next((p for p in folders if p.is_dir() and "cookiecutter" in p.name), None)
    if source is None:
        return None
    paths = ["fixtures.lock"]
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        name = path.relative_to(source).as_posix()
        paths.append(jinja2.Template(name).render(cookiecutter=answers))
    return paths


def save_work(root: Path, paths: Sequence[str] | None) -> None:
    """Snapshot the user's files before the bake writes over them, in a private index: the files
    at `paths` as they are on disk, ignored ones too; with no paths known, every file git sees
    (from a copy of the user's index, whose stat cache spares hashing unedited files). Beside it,
    the list of tracked files the user deleted."""
    state = root / git(root, "rev-parse", "--git-path", STATE).decode().strip()
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    private = {"GIT_INDEX_FILE": str(state / "index"), "GIT_LITERAL_PATHSPECS": "1"}
    if paths is None:
        index = root / git(root, "rev-parse", "--git-path", "index").decode().strip()
        if index.is_file():
            shutil.copyfile(index, state / "index")
        git(root, "add", "--all", env=private)
    elif present := [p for p in paths if (root / p).is_file() or (root / p).is_symlink()]:
        git(root, "add", "--force", "--", *present, env=private)
    (state / "deleted").write_bytes(git(root, "ls-files", "--deleted", "-z"))


def main() -> int:
    answers = json.loads(ANSWERS)
    if shutil.which("git") is None:
        print(f"oracle-template: {GIT_REQUIRED}", file=sys.stderr)
        return 1
    errors = validate(answers)
    for line in errors:
        print(f"oracle-template: {line}", file=sys.stderr)
    if errors:
        return 1
    root = Path.cwd()
    if (root / ".git").exists():
        try:
            save_work(root, template_paths(answers))
        except (RuntimeError, OSError) as exc:
            print(f"oracle-template: cannot save your work before the bake: {exc}", file=sys.stderr)
            return 1
    return 0


def forget_rendered_copy(script: Path) -> None:
    """cookiecutter (2.7) runs a hook from a copy it renders into the temporary folder and
    never deletes (two files a bake): the copy deletes itself once loaded."""
    if script.parent.resolve() == Path(tempfile.gettempdir()).resolve():
        script.unlink(missing_ok=True)


if __name__ == "__main__":
    forget_rendered_copy(Path(__file__))
    sys.exit(main())
