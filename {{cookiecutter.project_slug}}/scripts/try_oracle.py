"""Run the property oracles of the working tree on its build, as the judge runs them.

    python scripts/try_oracle.py [PYTEST_ARG ...]     # `nox -s oracle -- -k NAME`

The loop for writing a property oracle (docs/write-a-property-oracle.md): the working tree as
`git add --all` would commit it (uncommitted changes and untracked files that git does not
ignore included; the index, the branch and the files stay as they are) is checked out apart
and built as the judge builds a commit: offline from the wheelhouse, not editable. The tests of
its oracle/ then run in this interpreter's environment (the `oracle` session's: the judge's
tools, never the project), each call crossing to the subject worker on that build, through the
judge's own oracle run (scripts/_gate/runs/oracle_run.py): same pytest settings, same hypothesis
profile, same worker and confinement. PYTEST_ARG go to pytest: options (`-k NAME`, `-x`) and
tests named as `oracle/test_x.py::test_y`.
The judge needs more than a pass: every oracle must pass on the base and reach an assertion
there, so a property that passes without reaching one is reported here as it would be there.
Exit codes: 0 every oracle that ran passed and reached an assertion, 1 one failed, errored or
reached no assertion (each named, with its message), 2 fail closed (not a git repository, the
tree does not build, no oracle test ran, pytest left no result).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from _gate.core.config import Config, load_config
from _gate.core.protocol import BLOCK, PASS, FailClosed, Outcome, concluded, say
from _gate.core.reports import write_report
from _gate.core.seal import TrustedEnv
from _gate.runs.envs import WHEELHOUSE
from _gate.runs.git import add_worktree, git, remove_worktree, repo_root
from _gate.runs.kept_envs import base_build, made
from _gate.runs.oracle_run import PREFIX, RETRYABLE, has_tests
from _gate.runs.oracle_run import run as run_oracle
from _gate.runs.pytest_args import add_pytest_args, passed_through
from _gate.runs.pytest_run import PytestRun, Subject
from _gate.runs.sandbox import require_sandbox

NAME = "oracle"
REPORT = Path("reports") / "try-oracle.json"
REQUIREMENTS = "scripts/requirements-judge.txt"
TIMEOUT = 900.0  # seconds for the whole pytest run, as the judge's oracle step allows
# The snapshot's commit: a fixed identity and date, so the same tree is the same commit.
SNAPSHOT = {
    "GIT_AUTHOR_NAME": "oracle session",
    "GIT_AUTHOR_EMAIL": "oracle@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "oracle session",
    "GIT_COMMITTER_EMAIL": "oracle@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}
SHOWN = 3  # failing oracles named in the last line
CUT = 500  # a test's message is its last 500 characters (_gate/plugin/pytest_evidence.py)
EXIT_CODES = (
    "exit codes: 0 every oracle that ran passed and reached an assertion, 1 one failed, "
    "errored or reached no assertion, 2 fail closed (not a git repository, the tree does not "
    "build, no oracle test ran)"
)


def snapshot(repo: Path, tmp: Path) -> tuple[str, str]:
    """A commit of the working tree as `git add --all` would stage it, on top of HEAD, made
    through a copy of the index (git writes the objects, as `git stash create` does; no ref,
    index or file of the repository changes); and how to name it."""
    index = tmp / "index"
    own = Path(git(repo, "rev-parse", "--git-path", "index").strip())
    own = own if own.is_absolute() else repo / own
    if own.is_file():
        index.write_bytes(own.read_bytes())  # staged changes kept, and git's stat cache
    env = {"GIT_INDEX_FILE": str(index)}
    git(repo, "add", "--all", env=env)
    tree = git(repo, "write-tree", env=env).strip()
    head = git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).strip()
    parent = ["-p", head] if head else []
    message = "the working tree, as nox -s oracle builds it"
    sha = git(repo, "commit-tree", tree, *parent, "-m", message, env=SNAPSHOT).strip()
    if not head:
        return sha, "the working tree (no commit yet)"
    same = git(repo, "rev-parse", "HEAD^{tree}").strip() == tree
    label = f"HEAD ({head[:12]})" + ("" if same else " with the working tree's changes")
    return sha, label


class Built(NamedTuple):
    tree: Path  # the working tree, checked out apart
    python: Path  # its build's
    label: str  # how to name it
    config: Config  # its oracle/judge.yaml


@contextmanager
def working_tree(repo: Path) -> Iterator[Built]:
    """The working tree checked out apart and built as the judge builds a commit; all gone
    afterwards."""
    with tempfile.TemporaryDirectory(prefix="oracle-here-") as name:
        tmp = Path(name)
        sha, label = snapshot(repo, tmp)
        tree = add_worktree(repo, sha, tmp / "tree")
        try:
            config = load_config(tree / "oracle" / "judge.yaml")
            require_sandbox(config.sandbox == "required")
            if not has_tests(tree / "oracle"):
                raise FailClosed(
                    "oracle/ holds no property oracle (oracle/test_*.py): write one, see "
                    "docs/write-a-property-oracle.md"
                )
            if not (tree / REQUIREMENTS).is_file():
                raise FailClosed(f"{REQUIREMENTS} is missing: restore it from the base branch")
            say(f"{NAME}: building {label}", error=True)
            build = base_build(tree, WHEELHOUSE.absolute(), tree / REQUIREMENTS, lambda: None)
            python, _ = made(build, tmp / "build", "the working tree's build")
            yield Built(tree, python, label, config)
        finally:
            remove_worktree(repo, tree)


def split(pytest_args: Sequence[str], oracle: Path) -> tuple[list[str], list[str]]:
    """The tests named as the repository shows them (`oracle/test_x.py::test_y`), relative to
    oracle/ as the run takes them; and pytest's other arguments, its options."""
    targets, options = [], []
    for arg in pytest_args:
        name = arg.removeprefix(PREFIX)
        if arg.startswith(PREFIX) and (oracle / name.split("::")[0]).exists():
            targets.append(name)
        else:
            options.append(arg)
    return targets, options


def execute(repo: Path, pytest_args: Sequence[str]) -> Outcome:
    if sys.prefix == sys.base_prefix:
        raise FailClosed(
            "run it in an environment of the judge's tools, which the oracle's checks keep "
            "as they found it (`nox -s oracle`), not in this interpreter's own installation"
        )
    repo = repo_root(repo)
    with working_tree(repo) as built:
        oracle = built.tree / "oracle"
        targets, options = split(pytest_args, oracle)
        runner = TrustedEnv(Path(sys.executable))
        timeout = built.config.call_timeout
        subject = Subject(built.python, timeout)
        ran = run_oracle(
            runner, subject, oracle, TIMEOUT, targets=targets or (".",), options=options
        )
        here = {str(built.tree): str(repo), str(built.tree.resolve()): str(repo)}
        ran = ran.renamed(lambda text: replaced(text, here))
    return judged(ran, built.label)


def replaced(text: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        text = text.replace(old, new)
    return text


def judged(ran: PytestRun, label: str) -> Outcome:
    """Every oracle that ran must pass and reach an assertion, as the judge asks of a base."""
    where = f"the build of {label}"
    if ran.outcomes is None:
        why = "timed out" if ran.timed_out else f"exit {ran.exit_code}"
        tail = ran.output_tail.strip().splitlines()
        raise FailClosed(
            f"pytest left no result on {where} ({why}): {tail[-1] if tail else 'no output'}"
        )
    outcomes = ran.outcomes
    if not outcomes:
        tail = ran.output_tail.strip().splitlines()
        said = f": {tail[-1]}" if tail else ""
        raise FailClosed(f"no oracle test ran on {where} (pytest exit {ran.exit_code}){said}")
    lost = sorted(node for node, outcome in outcomes.items() if outcome in RETRYABLE)
    hitless = sorted(
        node for node, outcome in outcomes.items() if outcome == "passed" and not ran.hits[node]
    )
    for node in lost:
        say(f"{node}: {outcomes[node]}", error=True)
        message = ran.messages.get(node, "")
        lines = message.rstrip().splitlines()
        if len(message) >= CUT and len(lines) > 1:
            lines[0] = "..."  # the cut line's end
        for line in lines:
            say(f"    {line}", error=True)
    evidence = {"outcomes": outcomes, "hits": ran.hits, "exit_code": ran.exit_code}
    if lost:
        more = f" and {len(lost) - SHOWN} more" if len(lost) > SHOWN else ""
        named = ", ".join(f"{node} {outcomes[node]}" for node in lost[:SHOWN])
        summary = f"{len(lost)} of {len(outcomes)} oracles fail on {where}: {named}{more}"
        return Outcome(BLOCK, summary, evidence)
    if hitless:
        return Outcome(
            BLOCK,
            f"{hitless[0]} passed on {where} without reaching an assertion ({len(hitless)} "
            "tests): every example was filtered out or its asserts sit behind a branch no "
            "example takes; the judge fails such a property closed as incomplete",
            evidence,
        )
    if ran.exit_code != 0:
        tail = ran.output_tail.strip().splitlines()
        raise FailClosed(
            f"every oracle passed on {where} but pytest exited {ran.exit_code}: "
            f"{tail[-1] if tail else 'no output'}"
        )
    properties = len(outcomes.keys() & ran.properties)
    skipped = sum(outcome == "skipped" for outcome in outcomes.values())
    counted = f"{properties} property oracles and {len(outcomes) - properties} example oracles"
    note = f" ({skipped} skipped)" if skipped else ""
    return Outcome(PASS, f"{counted} pass on {where}{note}", evidence)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES)
    add_pytest_args(p, ", and tests named as `oracle/test_x.py::test_y`")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    pytest_args = passed_through(parser(), sys.argv[1:] if argv is None else argv)
    # This environment is the oracle's: held to what it held before the run, so no bytecode.
    sys.dont_write_bytecode = True
    report = concluded(NAME, lambda: execute(Path(os.curdir), pytest_args))
    write_report(REPORT, report.payload())
    say(f"{NAME}: {report.status}: {report.summary}", error=report.exit_code != PASS)
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
