"""Sessions of the oracle gate.

Start the judge from a trusted checkout of the base branch and pass the untrusted branch as
--head: nox reads this noxfile from wherever it is started, so running it inside a patch's own
worktree trusts that worktree.

    nox -s judge -- --head agent/branch      # exit 0 merge, 1 block, 2 fail closed
    nox -s record | lock | variance | tests | wheelhouse
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["judge"]

WHEELHOUSE = os.path.abspath(os.environ.get("ORACLE_WHEELHOUSE", ".oracle/wheelhouse"))
REQUIREMENTS = "scripts/requirements-judge.txt"
OFFLINE = ("--no-index", "--find-links", WHEELHOUSE)


def install_offline(session: nox.Session, project: bool = False) -> None:
    """Install only from the local, hash-checked wheelhouse: these sessions never go online."""
    session.install(*OFFLINE, "--require-hashes", "-r", REQUIREMENTS)
    if project:
        session.install(*OFFLINE, "--no-deps", "--no-build-isolation", ".")


def offline_env() -> dict[str, str]:
    return {
        "JUDGE_OFFLINE": "1",
        "ORACLE_WHEELHOUSE": WHEELHOUSE,
        "PIP_NO_INDEX": "1",
        "UV_OFFLINE": "1",
    }


@nox.session
def wheelhouse(session: nox.Session) -> None:
    """Fill the local wheelhouse from the package index, once (the only online step)."""
    session.run(
        "python", "scripts/wheelhouse.py", "--requirements", REQUIREMENTS, "--dest", WHEELHOUSE
    )


@nox.session(requires=["wheelhouse"])
def judge(session: nox.Session) -> None:
    """Judge --head (default HEAD) against --base (default: the merge base)."""
    install_offline(session)
    reports = Path("reports")
    session.run(
        "python",
        "scripts/judge.py",
        "--wheelhouse",
        WHEELHOUSE,
        "--reports",
        str(reports),
        *session.posargs,
        env=offline_env(),
        success_codes=[0, 1, 2],
    )
    try:
        code = int(json.loads((reports / "judge-report.json").read_text("utf-8"))["exit_code"])
    except (OSError, ValueError, KeyError):
        code = 2
    if code:
        # SystemExit passes through nox unchanged, so `nox -s judge` keeps the judge's 1 or 2.
        raise SystemExit(code)


@nox.session(requires=["wheelhouse"])
def record(session: nox.Session) -> None:
    """Record parent cassettes from the merge-base build into .oracle/cassettes/<base-sha>/."""
    install_offline(session)
    session.run(
        "python",
        "scripts/record_cassettes.py",
        "--wheelhouse",
        WHEELHOUSE,
        *session.posargs,
        env=offline_env(),
    )


@nox.session
def lock(session: nox.Session) -> None:
    """Write fixtures.lock: a human's action after an intended fixture change."""
    session.run("python", "scripts/lock_fixtures.py", "--write", *session.posargs)


@nox.session(requires=["wheelhouse"])
def variance(session: nox.Session) -> None:
    """Run the oracle k times and update the ledger on the oracle ref (CI: one run per runner)."""
    install_offline(session, project=True)
    if session.posargs:
        session.run("python", "scripts/variance_ledger.py", *session.posargs, env=offline_env())
        return
    runs = "reports/variance-runs.json"
    session.run("python", "scripts/variance_ledger.py", "run", "--out", runs, env=offline_env())
    session.run(
        "python", "scripts/variance_ledger.py", "merge", runs, "--update-ref", env=offline_env()
    )


@nox.session(requires=["wheelhouse"])
def tests(session: nox.Session) -> None:
    """The project's own unit tests: advisory to the gate."""
    install_offline(session, project=True)
    session.run("python", "-m", "pytest", "-q", "tests", *session.posargs, env=offline_env())
