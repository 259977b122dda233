"""Run the project's own unit tests: the `tests:` of oracle/judge.yaml, as the gate reads them.

    python scripts/unit_tests.py [PYTEST_ARG ...]     # e.g. -x, -k NAME; `nox -s tests`

Runs `python -m pytest -q` on the files and folders `tests:` names in this tree's
oracle/judge.yaml (tests/ where it names none), with this interpreter: the `tests` session's
environment, where the project is installed. The judge runs them too, as advisory evidence.
Exit codes: pytest's own (0 passed, 1 some failed, 5 none collected, ...), 2 fail closed
(oracle/judge.yaml cannot be read).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from _gate.core.config import tree_tests
from _gate.core.protocol import FAIL_CLOSED, FailClosed, say
from _gate.runs.pytest_args import add_pytest_args, passed_through


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="exit codes: pytest's own (0 passed, 1 some failed, 5 none collected), "
        "2 fail closed (oracle/judge.yaml cannot be read)",
    )
    add_pytest_args(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    pytest_args = passed_through(parser(), sys.argv[1:] if argv is None else argv)
    try:
        paths = tree_tests(Path("."))
    except FailClosed as exc:
        say(f"tests: error: {exc}", error=True)
        return FAIL_CLOSED
    args = ["-q", *paths, *pytest_args]
    say(f"tests: python -m pytest {shlex.join(args)}")
    # In this process, as `python -m pytest` would run: the project's own tests in its own
    # environment, for the user (the judge never reads this run; it runs the tests confined).
    # Imported here: --help needs the standard library alone.
    import pytest

    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main())
