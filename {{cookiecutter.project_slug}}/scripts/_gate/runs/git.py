"""Git: commands with a fixed environment, refs and merge bases, diffs, worktrees, and files
committed to the protected oracle ref with plumbing only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from _gate.core.config import CONFIG_FILE, Config, load_config
from _gate.core.context import Change
from _gate.core.protocol import FailClosed

# The oracle's strength score (scripts/strength.py) on the oracle ref, beside the ledger.
SCORE_FILE = "strength.json"


# Who commits to the oracle ref when the environment names nobody (a CI job).
REF_IDENTITY = {
    "GIT_AUTHOR_NAME": "oracle gate",
    "GIT_AUTHOR_EMAIL": "oracle-gate@localhost",
    "GIT_COMMITTER_NAME": "oracle gate",
    "GIT_COMMITTER_EMAIL": "oracle-gate@localhost",
}


def commit_file(repo: Path, ref: str, source: str, name: str, *, text: str, message: str) -> str:
    """Commit `text` as file `name` on top of `source` as refs/heads/<ref>, with plumbing only:
    the work tree is never touched and every other file of the ref is kept."""
    full = f"refs/heads/{ref}"
    parent = git(repo, "rev-parse", "--verify", "--quiet", source, check=False).strip()
    current = git(repo, "rev-parse", "--verify", "--quiet", full, check=False).strip()
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=text.encode()).strip()
    entries = git(repo, "ls-tree", "-z", parent).split("\0") if parent else []
    rows = [e for e in entries if e and not e.endswith(f"\t{name}")]
    rows.append(f"100644 blob {blob}\t{name}")
    tree = git(repo, "mktree", "-z", stdin="\0".join(rows).encode() + b"\0").strip()
    parents = ["-p", parent] if parent else []
    identity = {k: os.environ.get(k, v) for k, v in REF_IDENTITY.items()}
    commit = git(repo, "commit-tree", tree, *parents, "-m", message, env=identity).strip()
    git(repo, "update-ref", full, commit, *([current] if current else []))
    return commit


def git(
    repo: Path,
    *args: str,
    check: bool = True,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """Run git with a fixed environment; a failure becomes one line naming the command."""
    full_env = {**os.environ, **(env or {}), "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args],
            input=stdin,
            capture_output=True,
            env=full_env,
            check=False,
        )
    except FileNotFoundError:
        raise FailClosed("git is not installed or not on PATH; install git") from None
    if check and proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "backslashreplace").strip().splitlines()
        raise FailClosed(f"git {' '.join(args)} failed in {repo}: {detail[-1] if detail else ''}")
    return proc.stdout.decode("utf-8", "surrogateescape")


def repo_root(path: Path) -> Path:
    top = git(path, "rev-parse", "--show-toplevel", check=False).strip()
    if not top:
        raise FailClosed(f"{path} is not a git repository; run from a clone of the project")
    return Path(top)


def rev_exists(repo: Path, ref: str) -> bool:
    return bool(git(repo, "rev-parse", "--verify", "--quiet", ref + "^{commit}", check=False))


def resolve_commit(repo: Path, ref: str, option: str) -> str:
    sha = git(repo, "rev-parse", "--verify", "--quiet", ref + "^{commit}", check=False).strip()
    if not sha:
        raise FailClosed(
            f"{option} {ref!r} is not a commit in {repo}; fetch it or pass an existing ref"
        )
    return sha


def base_ref(repo: Path, base_branch: str) -> str:
    """The base branch as the judge reads it: the remote's copy when there is one."""
    remote = f"origin/{base_branch}"
    target = remote if rev_exists(repo, remote) else base_branch
    if not rev_exists(repo, target):
        raise FailClosed(f"base branch {base_branch!r} does not exist; pass --base REF")
    return target


def default_base(repo: Path, head: str, base_branch: str) -> str:
    """The merge base of head and the base branch, preferring the remote's copy of the branch."""
    target = base_ref(repo, base_branch)
    sha = git(repo, "merge-base", head, target, check=False).strip()
    if not sha:
        raise FailClosed(
            f"no merge base between {head} and {target} (shallow clone?); "
            "run `git fetch --unshallow` or pass --base REF"
        )
    return sha


def parse_name_status(raw: str) -> list[tuple[str, list[str]]]:
    """Parse `--name-status -z` output: a status token, then one path, or two for R and C."""
    tokens = [t for t in raw.split("\0") if t]
    rows: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(tokens):
        status = tokens[i].strip()
        width = 2 if status[:1] in ("R", "C") else 1
        rows.append((status, tokens[i + 1 : i + 1 + width]))
        i += 1 + width
    return rows


def resolve_oracle_ref(repo: Path, ref: str) -> str:
    """The oracle ref to read: the remote's copy first, since the patch author cannot push it."""
    for candidate in (f"refs/remotes/origin/{ref}", f"refs/heads/{ref}"):
        if rev_exists(repo, candidate):
            return candidate
    raise FailClosed(f"oracle ref {ref!r} does not exist here; {oracle_ref_fix(repo, ref)}")


def oracle_ref_fix(repo: Path, ref: str) -> str:
    """How to bring the oracle ref: a clone CI made (shallow, single-branch or partial) often
    has a remote that holds it but did not fetch it."""
    remote = git(repo, "remote", "get-url", "origin", check=False).strip()
    if not remote:
        return "create it (docs/protect-the-oracle-ref.md), or add the remote that holds it"
    fetch = f"git fetch origin {ref}:refs/remotes/origin/{ref}"
    shallow = git(repo, "rev-parse", "--is-shallow-repository", check=False).strip() == "true"
    clone = "this clone is shallow and " if shallow else ""
    return (
        f"{clone}fetches only some branches: run `{fetch}` (in CI: fetch-depth: 0, or that "
        f"command before the judge); if origin has no {ref!r}, create it "
        "(docs/protect-the-oracle-ref.md)"
    )


def uncommitted(repo: Path, paths: Sequence[str]) -> list[str]:
    """Which of `paths` (files or folders) differ in the working tree or index from HEAD, or
    are untracked: the gate reads committed revisions only."""
    changed = git(repo, "diff", "HEAD", "--name-only", "-z", "--", *paths)
    new = git(repo, "ls-files", "--others", "--exclude-standard", "-z", "--", *paths)
    return sorted(set(filter(None, (changed + new).split("\0"))))


def show_file(repo: Path, ref: str, path: str) -> bytes | None:
    proc = subprocess.run(
        ["git", "-C", str(repo), "show", f"{ref}:{path}"], capture_output=True, check=False
    )
    return proc.stdout if proc.returncode == 0 else None


def tracked(folder: Path) -> list[str]:
    """The regular files git tracks under `folder`, relative to it (every regular file of a
    folder outside git), sorted: what a copy of a checkout holds."""
    listed = git(folder, "ls-files", "-z", check=False)
    names = (
        listed.split("\0")
        if listed
        else [p.relative_to(folder).as_posix() for p in folder.rglob("*")]
    )
    return sorted(
        rel
        for rel in filter(None, names)
        if rel.split("/", 1)[0] != ".git"
        and (folder / rel).is_file()
        and not (folder / rel).is_symlink()
    )


def add_worktree(repo: Path, sha: str, dest: Path) -> Path:
    git(repo, "worktree", "add", "--detach", "--force", str(dest), sha)
    return dest


def remove_worktree(repo: Path, dest: Path) -> None:
    git(repo, "worktree", "remove", "--force", str(dest), check=False)
    shutil.rmtree(dest, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)


def changes(repo: Path, base: str, head: str) -> tuple[Change, ...]:
    """The diff from base to head, renames detected (`git diff -M --name-status`)."""
    raw = git(repo, "diff", "-z", "--name-status", "-M", base, head)
    return tuple((status, tuple(paths)) for status, paths in parse_name_status(raw))


def committed_config(repo: Path, path: Path | None = None) -> Config:
    """oracle/judge.yaml as this checkout's HEAD commits it (or the file `path`, a tool's
    --config): the gate reads committed revisions, so an edit in the working tree (a typo too)
    changes nothing until committed."""
    if path is not None:
        return load_config(path)
    data = show_file(repo, "HEAD", CONFIG_FILE)
    if data is None:
        raise FailClosed(
            f"{CONFIG_FILE}: not committed on HEAD of {repo}: this branch has no oracle gate; "
            "bake or adopt it and commit, or check out the base branch"
        )
    return load_config(repo / CONFIG_FILE, data)
