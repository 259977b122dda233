"""Finish the bake: drop the example if asked, lock fixtures, make the git repo and oracle ref.

Over an existing repository (`cookiecutter --replay -f`) the bake only adds files: it never
re-inits, never commits, never moves an existing oracle ref, and every file of the user's it
changed or removed is put back as pre_gen_project.py saved it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ANSWERS = r"""{{ cookiecutter | tojson }}"""
# Where pre_gen_project.py saved the user's files, under the repository's git dir.
STATE = "oracle-template"

# Baking must work on a machine with no git config: every commit names its own identity and
# ignores signing and hooks the user may have configured globally.
IDENTITY = (
    "-c",
    "user.name=oracle-template",
    "-c",
    "user.email=oracle-template@localhost",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.hooksPath=/dev/null",
)
EXAMPLE = (
    "src/{pkg}/discounts.py",
    "src/{pkg}/orders.py",
    "tests/test_discounts.py",
    "tests/test_orders.py",
    "oracle/adapter.py",
    "oracle/test_properties.py",
    "oracle/test_replay_corpus.py",
    "oracle/test_rejections.py",
    "fixtures/carts.jsonl",
    "fixtures/carts.md",
    "fixtures/cwd/existing-order/.orders/ord_1.json",
)
CI = (".github/workflows/oracle.yml", ".github/requirements-ci.txt")
MINIMAL = {
    "src/{pkg}/cli.py": '''"""Command-line entry point: the public surface the cassettes record."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

PROG = "{cli}"  # the console script's name (pyproject.toml), as usage lines show it


def parser() -> argparse.ArgumentParser:
    """Add your commands here; `--help` already works, so it can be the first case."""
    return argparse.ArgumentParser(prog=PROG, description="Replace with your commands.")


def main(argv: Sequence[str] | None = None) -> int:
    parser().parse_args(argv)  # exits 0 on --help, 2 on an unknown argument
    print(f"{PROG}: nothing to do yet")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
''',
    "tests/test_cli.py": """from __future__ import annotations

import pytest

from {pkg}.cli import main


def test_main_without_arguments_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "nothing to do yet" in capsys.readouterr().out


def test_help_exits_zero_and_names_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("usage: {cli}")


def test_main_rejects_unknown_arguments() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["unknown"])
    assert exc.value.code == 2
""",
    "oracle/adapter.py": '"""What property oracles call via `subject`: see '
    'docs/write-a-property-oracle.md."""\n',
    "oracle/cases.yaml": "# Cassette cases: see docs/add-a-case.md.\ncases: []\n",
    "oracle/allowlist.yaml": "# Reviewed contract changes, one base each: `nox -s allow`.\n"
    "allow: []\n",
}
ORACLE_FILES = {
    "quarantine.yaml": "# Flake quarantine: rows of id, until (YYYY-MM-DD), reason, owner.\n"
    "quarantine: []\n",
    "variance-ledger.json": '{\n  "frozen": {},\n  "history": []\n}\n',  # as the ledger writes it
}


def run_git(
    root: Path, *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None
) -> bytes:
    proc = subprocess.run(
        ["git", *IDENTITY, *args],
        cwd=root,
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def git(root: Path, *args: str, stdin: bytes | None = None) -> str:
    return run_git(root, *args, stdin=stdin).decode().strip()


def drop(root: Path, paths: Iterable[str]) -> None:
    """Remove the template's own files and the folders that leaves empty, never a folder whole:
    over an existing repository a folder may hold the user's files too."""
    for rel in paths:
        path = root / rel
        path.unlink(missing_ok=True)
        for parent in path.parents[: len(Path(rel).parts) - 1]:
            with contextlib.suppress(OSError):  # not empty: the user's files stay
                parent.rmdir()


def drop_example(root: Path, pkg: str, cli: str) -> None:
    drop(root, (rel.format(pkg=pkg) for rel in EXAMPLE))
    for rel, text in MINIMAL.items():
        text = text.replace("{pkg}", pkg).replace("{cli}", cli)
        (root / rel.format(pkg=pkg)).write_text(text, "utf-8")


def write_lock(root: Path) -> None:
    sys.path.insert(0, str(root / "scripts"))
    # The gate's own code, so the formats cannot drift.
    from _gate.steps.fixtures_lock import build, render

    (root / "fixtures.lock").write_text(render(build(root)), "utf-8")


def make_oracle_ref(root: Path, ref: str) -> None:
    """An orphan commit holding the quarantine and the ledger, made with plumbing only."""
    if git(root, "for-each-ref", f"refs/heads/{ref}"):
        return
    rows = [
        f"100644 blob {git(root, 'hash-object', '-w', '--stdin', stdin=text.encode())}\t{name}"
        for name, text in ORACLE_FILES.items()
    ]
    tree = git(root, "mktree", stdin="\n".join(rows).encode() + b"\n")
    commit = git(root, "commit-tree", tree, "-m", "oracle ref: empty quarantine and ledger")
    git(root, "update-ref", f"refs/heads/{ref}", commit)


def init_repo(root: Path, answers: Mapping[str, Any]) -> None:
    git(root, "init", "--quiet")
    git(root, "symbolic-ref", "HEAD", f"refs/heads/{answers['base_branch']}")
    git(root, "add", "--all")
    title = " ".join(str(answers["project_name"]).split())
    git(root, "commit", "--quiet", "--no-verify", "-m", f"Bake {title} from oracle-template")


def restore_work(root: Path) -> list[str]:
    """Put back every saved file the bake changed or removed, and remove again each tracked file
    the user had deleted and the bake wrote anew; returns their paths."""
    state = root / git(root, "rev-parse", "--git-path", STATE)
    if not (state / "index").is_file():
        return []
    private = {"GIT_INDEX_FILE": str(state / "index"), "GIT_LITERAL_PATHSPECS": "1"}
    run_git(root, "update-index", "-q", "--refresh", env=private)
    changed = run_git(root, "diff-files", "--name-only", "-z", env=private)
    if changed:
        run_git(root, "checkout-index", "--force", "-z", "--stdin", stdin=changed, env=private)
    deleted = (state / "deleted").read_bytes().decode().split("\0")
    recreated = [rel for rel in deleted if rel and os.path.lexists(root / rel)]
    for rel in recreated:
        (root / rel).unlink()
    shutil.rmtree(state)
    return sorted({*changed.decode().split("\0"), *recreated} - {""})


def finish(root: Path, answers: Mapping[str, Any], fresh: bool) -> None:
    if answers["include_example"] == "no":
        drop_example(root, str(answers["package_name"]), str(answers["cli_command"]))
    if answers["ci"] == "none":
        drop(root, CI)
    write_lock(root)
    if fresh:
        init_repo(root, answers)
    make_oracle_ref(root, str(answers["oracle_ref"]))


def main(argv: Sequence[str] | None = None) -> int:
    answers = json.loads(ANSWERS)
    root = Path.cwd()
    fresh = not (root / ".git").exists()
    try:
        try:
            finish(root, answers, fresh)
        finally:
            kept = [] if fresh else restore_work(root)
    except (RuntimeError, OSError) as exc:
        print(f"oracle-template: {exc}", file=sys.stderr)
        return 1
    if not fresh:
        print(
            "oracle-template: existing repository: the bake only added files and put back yours"
            f" it changed or removed ({', '.join(kept) or 'none'}); take template changes with"
            " `cruft update`"
        )
        return 0
    if answers.get("_next_steps") != "no":  # adopt bakes to copy, not to use
        print("\n".join(next_steps(root.name, answers)), file=sys.stderr)
    return 0


PLACEHOLDER = (
    "@org/maintainers"  # cookiecutter.json's `owners`: _gate/core/patterns.py names it too
)


def next_steps(folder: str, answers: Mapping[str, Any]) -> list[str]:
    """The three commands after a fresh bake, and the placeholder owner to replace: on
    stderr, as a hint (`cruft diff` bakes too, and its stdout is the diff)."""
    if answers["include_example"] == "no":
        first = [
            "  nox -s case -- -- --help      # a first case: the judge needs one to compare",
            '  git commit -qam "first case" && nox -s judge',
        ]
    else:
        first = [
            "  nox -s judge                  # the example, judged: merge",
            "  nox -s judge -- --head BRANCH # an agent's branch: merge, block or fail closed",
        ]
    lines = [f"oracle-template: baked {folder}. Next:", f"  cd {folder}", *first]
    if PLACEHOLDER in str(answers["owners"]).split():
        lines.append(
            f"CODEOWNERS names {PLACEHOLDER}, a placeholder: the judge warns on this machine "
            "and refuses it in CI; put your team's handle there"
        )
    return lines


def forget_rendered_copy(script: Path) -> None:
    """cookiecutter (2.7) runs a hook from a copy it renders into the temporary folder and
    never deletes (two files a bake): the copy deletes itself once loaded."""
    if script.parent.resolve() == Path(tempfile.gettempdir()).resolve():
        script.unlink(missing_ok=True)


if __name__ == "__main__":
    forget_rendered_copy(Path(__file__))
    sys.exit(main())
