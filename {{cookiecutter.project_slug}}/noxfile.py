"""Sessions of the oracle gate.

Start the judge from a trusted checkout of the base branch and pass the untrusted branch as
--head: nox reads this noxfile from wherever it is started, so running it inside a patch's own
worktree trusts that worktree.

    nox -s judge -- --head agent/branch      # exit 0 merge, 1 block, 2 fail closed
    nox -s judge -- --head B --shard 2/4 --reports reports-2   # one CI runner of four
    nox -s merge -- reports-1 reports-2 reports-3 reports-4   # their verdict, exit as judge
    nox -s case -- --stdin TEXT -- ARG ...   # add a case from a command line
    nox -s strength -- [--only GLOB] [--mutants NAME]   # which mutants the oracle kills
    nox -s record | lock | variance | tests | wheelhouse | allow

`case`, `allow`, `record` and `lock` end with their script's own exit code (0, 1 or 2; each
script's --help says which means what); `--help` of any of them answers at once, before the
wheelhouse is filled.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import nox
from nox.command import CommandFailed

# The first nox with the uv backend and `|` fallbacks; CI pins a newer one (.github/).
nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["judge"]

WHEELHOUSE = os.path.abspath(os.environ.get("ORACLE_WHEELHOUSE", ".oracle/wheelhouse"))
REQUIREMENTS = "scripts/requirements-judge.txt"
STRENGTH = "scripts/requirements-strength.txt"  # mutmut, for the strength session only
OFFLINE = ("--no-index", "--find-links", WHEELHOUSE)
PASS, BLOCK, FAIL_CLOSED = 0, 1, 2
VERDICT = {PASS: "merge", BLOCK: "block", FAIL_CLOSED: "error"}
# Exit 2 is `needs-review` (a protected path) or `error`, which only the judge can tell: it
# writes the word to $ORACLE_VERDICT_FILE for finish() to read (and make, which names its own
# file). Without one from make, this run's own: fresh, so never an earlier run's, gone at exit.
if "ORACLE_VERDICT_FILE" not in os.environ:
    os.environ["ORACLE_VERDICT_FILE"] = tempfile.mkdtemp(prefix="oracle-verdict-") + "/verdict"
    atexit.register(shutil.rmtree, os.path.dirname(os.environ["ORACLE_VERDICT_FILE"]), True)


def install_offline(session: nox.Session, project: bool = False, *more: str) -> None:
    """Install only from the local, hash-checked wheelhouse: these sessions never go online.
    `more`: requirements files installed with the judge's (hash-checked as one set)."""
    files = [arg for name in (REQUIREMENTS, *more) for arg in ("-r", name)]
    session.install(*OFFLINE, "--require-hashes", *files)
    if project:
        session.install(*OFFLINE, "--no-deps", "--no-build-isolation", ".")


def offline_env() -> dict[str, str]:
    return {
        "JUDGE_OFFLINE": "1",
        "ORACLE_WHEELHOUSE": WHEELHOUSE,
        "PIP_NO_INDEX": "1",
        "UV_OFFLINE": "1",
    }


def finish(session: nox.Session, code: int, why: str = "") -> NoReturn:
    """End nox with `code` and one last line naming the verdict (exit 2: the one the judge
    wrote, else `error`): SystemExit passes through nox unchanged."""
    verdict = VERDICT[code]
    try:
        said = Path(os.environ["ORACLE_VERDICT_FILE"]).read_text("utf-8").strip()
    except OSError:
        said = ""
    if code == FAIL_CLOSED and said == "needs-review":
        verdict = said
    session.log(f"{session.name}: {verdict} (exit {code})" + (f": {why}" if why else ""))
    raise SystemExit(code)


def status(exc: CommandFailed) -> str:
    return f"status {exc.return_code}" if exc.return_code is not None else str(exc.reason)


def fill_wheelhouse(session: nox.Session, *more: str) -> None:
    """Run scripts/wheelhouse.py for the judge's requirements and `more` (one hash-checked
    set); a wheelhouse that cannot be filled fails closed (exit 2)."""
    report = Path("reports") / "wheelhouse.json"
    report.unlink(missing_ok=True)  # so the reason read below is this run's, never an old one
    files = [arg for name in (REQUIREMENTS, *more) for arg in ("--requirements", name)]
    try:
        # run_install: filling the wheelhouse is installing, so --install-only still does it.
        session.run_install(
            "python", "scripts/wheelhouse.py", *files, "--dest", WHEELHOUSE, "--report", str(report)
        )
    except CommandFailed as exc:
        try:
            why = str(json.loads(report.read_text("utf-8"))["summary"])
        except (OSError, ValueError, KeyError, TypeError):
            why = f"scripts/wheelhouse.py ended with {status(exc)}"
        finish(session, FAIL_CLOSED, why if session.name == "wheelhouse" else f"wheelhouse: {why}")


def asks_help(posargs: Sequence[str]) -> bool:
    """-h, --help or an abbreviation argparse takes for it (--hel): exit 0 and no verdict."""
    for arg in posargs:
        if arg == "--":
            return False
        if arg == "-h" or (len(arg) >= len("--hel") and "--help".startswith(arg)):
            return True
    return False


@nox.session
def wheelhouse(session: nox.Session) -> None:
    """Fill the local wheelhouse from the package index, once (the only online step)."""
    fill_wheelhouse(session)


@nox.session
def judge(session: nox.Session) -> None:
    """Judge --head (default HEAD) against --base (default: the merge base)."""
    prepare(session)
    decide(session, "scripts/judge.py", "--wheelhouse", WHEELHOUSE, *session.posargs)


@nox.session(venv_backend="none")
def merge(session: nox.Session) -> None:
    """Merge the report folders of `judge -- --shard I/N` runs into one verdict (stdlib only)."""
    decide(session, "scripts/merge_shards.py", *session.posargs)


def decide(session: nox.Session, script: str, *args: str) -> None:
    """Run a script that ends in a verdict and end nox with its exit code."""
    try:
        ran = session.run("python", script, *args, env=offline_env())
    except CommandFailed as exc:
        # The exit is the script's own return code, never read from a report on disk: --reports
        # can move the report, and argparse or --help stop the judge before it writes one.
        if exc.return_code in (BLOCK, FAIL_CLOSED):
            finish(session, exc.return_code)
        finish(session, FAIL_CLOSED, f"{script} ended with {status(exc)}, not 0, 1 or 2")
    if ran is None:  # nox --install-only: nothing was judged
        session.log(f"{session.name}: environment installed, nothing judged (exit 0)")
    elif asks_help(session.posargs):
        session.log(f"{session.name}: help printed, nothing judged (exit 0)")
    else:
        session.log(f"{session.name}: merge (exit 0)")


def prepare(session: nox.Session, project: bool = False, *more: str, tool: bool = True) -> None:
    """Fill the wheelhouse, then install from it; nothing when the arguments ask for help (the
    tools' --help needs only the standard library), so --help never waits for a download.
    `tool=False`: the arguments are another program's (pytest's), whose --help needs it installed.
    Not `requires=["wheelhouse"]`: nox ends a session whose requirement failed with 1, and a
    wheelhouse that cannot be filled fails closed with 2."""
    if tool and asks_help(session.posargs):
        return
    fill_wheelhouse(session, *more)
    try:
        install_offline(session, project, *more)
    except CommandFailed as exc:
        finish(session, FAIL_CLOSED, f"installing from {WHEELHOUSE} ended with {status(exc)}")


def tool(session: nox.Session, script: str, *args: str) -> NoReturn:
    """Run one of the gate's tools and end nox with the tool's own exit code (0, 1 or 2, as
    its --help says), not nox's 1 for any failure."""
    try:
        session.run("python", script, *args, *session.posargs, env=offline_env())
    except CommandFailed as exc:
        code = exc.return_code if exc.return_code is not None else FAIL_CLOSED
        session.log(f"{session.name}: exit {code} (see {script} --help)")
        raise SystemExit(code) from None
    raise SystemExit(PASS)


@nox.session
def record(session: nox.Session) -> None:
    """Record parent cassettes from the merge-base build into .oracle/cassettes/<base-sha>/."""
    prepare(session)
    tool(session, "scripts/record_cassettes.py", "--wheelhouse", WHEELHOUSE)


@nox.session
def case(session: nox.Session) -> None:
    """Add a case to oracle/cases.yaml from a command line: `nox -s case -- -- ARG ...`."""
    prepare(session)
    tool(session, "scripts/add_case.py", "--wheelhouse", WHEELHOUSE)


@nox.session
def lock(session: nox.Session) -> None:
    """Write fixtures.lock: a human's action after an intended fixture change."""
    tool(session, "scripts/fixtures_lock.py", "--write")


@nox.session
def variance(session: nox.Session) -> None:
    """Run the oracle k times on this machine and report what is unstable.

    The ledger on the oracle ref takes runs from at least two machines: CI's variance jobs
    (`-- run` / `-- merge`)."""
    prepare(session, project=True)
    if session.posargs:
        session.run("python", "scripts/variance_ledger.py", *session.posargs, env=offline_env())
        return
    runs = "reports/variance-runs.json"
    session.run("python", "scripts/variance_ledger.py", "run", "--out", runs, env=offline_env())
    session.run("python", "scripts/variance_ledger.py", "merge", runs, env=offline_env())


@nox.session
def strength(session: nox.Session) -> None:
    """Measure which mutants of `strength_paths` the oracle kills (reports/strength.md).

    mutmut makes the mutants; the cassettes, the properties and the project's tests each try."""
    prepare(session, True, STRENGTH)
    session.run("python", "scripts/strength.py", *session.posargs, env=offline_env())


@nox.session
def tests(session: nox.Session) -> None:
    """Run the project's own unit tests, `tests:` of oracle/judge.yaml (advisory to the gate)."""
    prepare(session, project=True, tool=False)
    # Read as the gate reads it (scripts/_gate/ needs PyYAML: the session has it, nox not).
    read = (
        "import pathlib, sys; sys.path.insert(0, 'scripts')\n"
        "from _gate.config import tree_tests; from _gate.protocol import FailClosed\n"
        "try: print(*tree_tests(pathlib.Path('.')), sep='\\n')\n"
        "except FailClosed as exc: sys.exit(str(exc))"
    )
    listed = session.run("python", "-c", read, silent=True, env=offline_env())
    paths = str(listed or "").splitlines()
    session.run("python", "-m", "pytest", "-q", *paths, *session.posargs, env=offline_env())


@nox.session
def allow(session: nox.Session) -> None:
    """Append a reviewed allowlist row naming the base it was reviewed against (see --help)."""
    prepare(session)
    tool(session, "scripts/allow.py")
