"""Finish the bake: drop the example if asked, lock fixtures, make the git repo and oracle ref.

Idempotent: over an existing repository (--overwrite-if-exists, cruft update) it never re-inits,
never commits over the user's work and never moves an existing oracle ref.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ANSWERS = r"""{{ cookiecutter | tojson }}"""

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
    "fixtures/carts.jsonl",
    "fixtures/carts.md",
    "fixtures/cwd",
)
MINIMAL = {
    "src/{pkg}/cli.py": '''"""Command-line entry point: the public surface the cassettes record."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; replace with your commands and add cases to oracle/cases.yaml."""
    args = list(sys.argv[1:] if argv is None else argv)
    print("usage: add your commands to cli.py", file=sys.stderr if args else sys.stdout)
    return 2 if args else 0


if __name__ == "__main__":
    raise SystemExit(main())
''',
    "tests/test_cli.py": """from __future__ import annotations

from {pkg}.cli import main


def test_main_without_arguments_succeeds() -> None:
    assert main([]) == 0


def test_main_rejects_unknown_arguments() -> None:
    assert main(["unknown"]) == 2
""",
    "oracle/adapter.py": '"""What property oracles call via `subject`: see the README."""\n',
    "oracle/cases.yaml": "# Cassette cases: see the README, 'How to add a case'.\ncases: []\n",
    "oracle/allowlist.yaml": "# Reviewed contract changes, one base each: `nox -s allow`.\n"
    "allow: []\n",
}
ORACLE_FILES = {
    "quarantine.yaml": "# Flake quarantine: rows of id, until (YYYY-MM-DD), reason, owner.\n"
    "quarantine: []\n",
    "variance-ledger.json": "{}\n",
}


def git(root: Path, *args: str, stdin: bytes | None = None) -> str:
    proc = subprocess.run(["git", *IDENTITY, *args], cwd=root, input=stdin, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode().strip()


def drop_example(root: Path, pkg: str) -> None:
    for rel in EXAMPLE:
        path = root / rel.format(pkg=pkg)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for rel, text in MINIMAL.items():
        (root / rel.format(pkg=pkg)).write_text(text.replace("{pkg}", pkg), "utf-8")


def write_lock(root: Path) -> None:
    sys.path.insert(0, str(root / "scripts"))
    from lock_fixtures import build, render  # the gate's own code, so the formats cannot drift

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
    if (root / ".git").exists():
        print("oracle-template: existing git repository kept; review and commit the changes")
    else:
        git(root, "init", "--quiet")
        git(root, "symbolic-ref", "HEAD", f"refs/heads/{answers['base_branch']}")
        git(root, "add", "--all")
        title = " ".join(str(answers["project_name"]).split())
        git(root, "commit", "--quiet", "--no-verify", "-m", f"Bake {title} from oracle-template")
    make_oracle_ref(root, str(answers["oracle_ref"]))


def main(argv: Sequence[str] | None = None) -> int:
    answers = json.loads(ANSWERS)
    root = Path.cwd()
    if shutil.which("git") is None:
        print(
            "oracle-template: git is required to bake (git init, oracle ref); install git",
            file=sys.stderr,
        )
        return 1
    if answers["include_example"] == "no":
        drop_example(root, str(answers["package_name"]))
    if answers["ci"] == "none":
        shutil.rmtree(root / ".github", ignore_errors=True)
    try:
        write_lock(root)
        init_repo(root, answers)
    except (RuntimeError, OSError) as exc:
        print(f"oracle-template: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
