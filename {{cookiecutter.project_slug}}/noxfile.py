"""Sessions of the oracle gate.

Start the judge from a trusted checkout of the base branch and pass the untrusted branch as
--head: nox reads this noxfile from wherever it is started, so running it inside a patch's own
worktree trusts that worktree.

    nox -s judge -- --head agent/branch      # exit 0 merge, 1 block, 2 fail closed
    nox -s judge -- --head B --shard 2/4 --reports reports-2   # one CI runner of four
    nox -s merge -- reports-1 reports-2 reports-3 reports-4   # their verdict, exit as judge
    nox -s case -- --stdin TEXT -- ARG ...   # add a case from a command line
    nox -s strength -- [--only GLOB] [--mutants NAME]   # which mutants the oracle kills
    nox -s oracle -- [-k NAME]               # the property oracles on the working tree's build
    nox -s record | lock | variance | tests | wheelhouse | allow

`case`, `allow`, `record`, `lock` and `oracle` end with their script's own exit code (0, 1 or 2;
each script's --help says which means what). `nox -s NAME -- --help` answers at once for every
session: nox makes no environment for it and nothing is downloaded or installed.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

import nox
from nox.command import CommandFailed

# What asks for help: the one rule, stdlib only, that the scripts passing to pytest share.
sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))
from _gate.core.checkout_lock import hold, judging
from _gate.runs.pytest_args import asks_help

# The first nox with the uv backend and `|` fallbacks; CI pins a newer one (.github/).
nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["judge"]

WHEELHOUSE = os.path.abspath(os.environ.get("ORACLE_WHEELHOUSE", ".oracle/wheelhouse"))
REQUIREMENTS = "scripts/requirements-judge.txt"
STRENGTH = "scripts/requirements-strength.txt"  # mutmut, for the strength session only
UNIT_TESTS = "scripts/unit_tests.py"  # `tests:` of oracle/judge.yaml, run by pytest
TRY_ORACLE = "scripts/try_oracle.py"  # the property oracles on a build of the working tree
OFFLINE = ("--no-index", "--find-links", WHEELHOUSE)
PASS, BLOCK, FAIL_CLOSED = 0, 1, 2
VERDICT = {PASS: "merge", BLOCK: "block", FAIL_CLOSED: "error"}
VERDICT_SESSIONS = ("judge", "merge")  # the sessions that end in a verdict (`decide`)
# Exit 2 is `needs-review` (a protected path) or `error`, which only the judge can tell: it
# writes the word to $ORACLE_VERDICT_FILE for finish() to read (and make, which names its own
# file). Without one from make, this run's own: fresh, so never an earlier run's, gone at exit.
OWN_VERDICT = ""
if "ORACLE_VERDICT_FILE" not in os.environ:
    OWN_VERDICT = tempfile.mkdtemp(prefix="oracle-verdict-")
    os.environ["ORACLE_VERDICT_FILE"] = OWN_VERDICT + "/verdict"
WANTED: list[str] = []  # the judge may run: the checkout's lock is held (below)
STARTED: list[str] = []  # the judge session's function ran: nox made its environment


def at_exit() -> None:
    """Remove this run's verdict folder. nox ends 1, which reads as `block`, when it cannot
    make a session's environment: a judge wanted and never started ends 2, saying so."""
    if OWN_VERDICT:
        shutil.rmtree(OWN_VERDICT, ignore_errors=True)
    if WANTED and not STARTED:
        why = "nox could not prepare the judge's environment (see above); nothing was judged"
        print(f"nox > judge: error (exit {FAIL_CLOSED}): {why}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(FAIL_CLOSED)


atexit.register(at_exit)  # first registered, so the last to run


def command_line_posargs(argv: Sequence[str]) -> list[str]:
    """What nox gives its sessions as `session.posargs`: its arguments after the first `--`."""
    return list(argv[argv.index("--") + 1 :]) if "--" in argv else []


def interrupted(number: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM and SIGHUP (a CI job cancelled, `timeout`, a terminal closed) end nox as Ctrl-C
    does: the running command gets SIGTERM after its `interrupt_timeout`, then its
    `terminate_timeout` to end (the judge's cleanup, `decide`), and nox's exit handlers run."""
    raise KeyboardInterrupt


for _number in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_number, interrupted)
# The judge ends within 7 s of a signal (scripts/_gate/judge/interrupt.py); Ctrl-C reaches it
# at once, a signal to nox alone after INTERRUPT_WAIT.
INTERRUPT_WAIT, TERMINATE_WAIT = 1.0, 10.0


# A session sees its arguments only once nox has made its environment, so the command line says
# here whether they ask for help: then nox makes none (the scripts' --help needs only the
# standard library; each session answers it first, `helped`), and nothing is downloaded.
if asks_help(command_line_posargs(sys.argv)):
    nox.options.force_venv_backend = "none"


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


def helped(session: nox.Session, script: str, *args: str) -> bool:
    """Whether the arguments ask for help; if so, `script`'s is printed (given `args` and the
    arguments, so that `variance -- run --help` is the subcommand's) with nox's own
    interpreter, before anything is installed, and the session does nothing else. No bytecode
    is written: help leaves nothing behind."""
    if not asks_help(session.posargs):
        return False
    try:
        cmd = (sys.executable, "-B", script, *args, *session.posargs)
        session.run(*cmd, external=True)
    except CommandFailed as exc:  # argparse refused an argument before it saw --help
        code = exc.return_code if exc.return_code is not None else FAIL_CLOSED
        session.log(f"{session.name}: exit {code} (see {script} --help)")
        raise SystemExit(code) from None
    nothing = "nothing judged" if session.name in VERDICT_SESSIONS else "nothing run"
    session.log(f"{session.name}: help printed, {nothing} (exit 0)")
    return True


def option(posargs: Sequence[str], name: str) -> str | None:
    """The value the arguments give option `name` (`--repo X` or `--repo=X`), if any."""
    for index, arg in enumerate(posargs):
        if arg == "--":
            break
        if arg == name and index + 1 < len(posargs):
            return posargs[index + 1]
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return None


# One judgment at a time in a checkout, taken as nox loads this file, before it makes any
# environment, and held until nox exits (scripts/_gate/core/checkout_lock.py).
if not asks_help(command_line_posargs(sys.argv)) and judging(
    sys.argv[1:], os.environ, nox.options.sessions or ()
):
    HEAD = option(command_line_posargs(sys.argv), "--head") or "HEAD"
    HELD, HOLDER = hold(Path(__file__).resolve().parent, HEAD)
    if HELD is None:
        print(f"nox > judge: error (exit {FAIL_CLOSED}): {HOLDER}", file=sys.stderr, flush=True)
        raise SystemExit(FAIL_CLOSED)
    WANTED.append(HEAD)


def require_repository(session: nox.Session) -> None:
    """Fail closed before any download when the judge's repository (--repo, default here) is
    not one git can read: the judge compares commits."""
    repo = os.path.abspath(option(session.posargs, "--repo") or ".")
    try:
        proc = subprocess.run(
            ["git", "-C", repo, "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        finish(session, FAIL_CLOSED, f"git cannot run ({exc}); the judge compares commits")
    if proc.returncode == 0:
        return
    said = (proc.stderr.strip().splitlines() or ["no message"])[-1].removeprefix("fatal: ")
    if "not a git repository" in said:
        why = f"{repo} is not in a git repository"
    else:
        why = f"git cannot read {repo} ({said})"
    finish(
        session,
        FAIL_CLOSED,
        f"{why}; the judge compares commits: run it in a clone of the project",
    )


@nox.session
def wheelhouse(session: nox.Session) -> None:
    """Fill the local wheelhouse from the package index, once (the only online step)."""
    if helped(session, "scripts/wheelhouse.py"):
        return
    fill_wheelhouse(session)


@nox.session
def judge(session: nox.Session) -> None:
    """Judge --head (default HEAD) against --base (default: the merge base)."""
    STARTED.append(session.name)
    if helped(session, "scripts/judge.py"):
        return
    require_repository(session)
    prepare(session)
    decide(session, "scripts/judge.py", "--wheelhouse", WHEELHOUSE, *session.posargs)


@nox.session(venv_backend="none")
def merge(session: nox.Session) -> None:
    """Merge the report folders of `judge -- --shard I/N` runs into one verdict (stdlib only)."""
    if helped(session, "scripts/merge_shards.py"):
        return
    decide(session, "scripts/merge_shards.py", *session.posargs)


def decide(session: nox.Session, script: str, *args: str) -> None:
    """Run a script that ends in a verdict and end nox with its exit code."""
    try:
        ran = session.run(
            "python",
            script,
            *args,
            env=offline_env(),
            interrupt_timeout=INTERRUPT_WAIT,
            terminate_timeout=TERMINATE_WAIT,
        )
    except KeyboardInterrupt:  # the script ended on the signal, its report saying so
        finish(session, FAIL_CLOSED, "interrupted")
    except CommandFailed as exc:
        # The exit is the script's own return code, never read from a report on disk: --reports
        # can move the report, and argparse or --help stop the judge before it writes one.
        if exc.return_code in (BLOCK, FAIL_CLOSED):
            finish(session, exc.return_code)
        finish(session, FAIL_CLOSED, f"{script} ended with {status(exc)}, not 0, 1 or 2")
    if ran is None:  # nox --install-only: nothing was judged
        session.log(f"{session.name}: environment installed, nothing judged (exit 0)")
    else:
        session.log(f"{session.name}: merge (exit 0)")


def prepare(session: nox.Session, project: bool = False, *more: str) -> None:
    """Fill the wheelhouse, then install from it (a session that answers --help has returned
    before: `helped`). Not `requires=["wheelhouse"]`: nox ends a session whose requirement
    failed with 1, and a wheelhouse that cannot be filled fails closed with 2."""
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
    """Record parent cassettes from the judge's base build into .oracle/cassettes/<base-sha>/."""
    if helped(session, "scripts/record_cassettes.py"):
        return
    prepare(session)
    tool(session, "scripts/record_cassettes.py", "--wheelhouse", WHEELHOUSE)


@nox.session
def case(session: nox.Session) -> None:
    """Add a case to oracle/cases.yaml from a command line: `nox -s case -- -- ARG ...`."""
    if helped(session, "scripts/add_case.py"):
        return
    prepare(session)
    tool(session, "scripts/add_case.py", "--wheelhouse", WHEELHOUSE)


@nox.session
def lock(session: nox.Session) -> None:
    """Write fixtures.lock: a human's action after an intended fixture change."""
    if helped(session, "scripts/fixtures_lock.py"):
        return
    tool(session, "scripts/fixtures_lock.py", "--write")


@nox.session
def variance(session: nox.Session) -> None:
    """Run the oracle k times on this machine and report what is unstable.

    The ledger on the oracle ref takes runs from at least two machines: CI's variance jobs
    (`-- run` / `-- merge`)."""
    if helped(session, "scripts/variance_ledger.py"):
        return
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
    if helped(session, "scripts/strength.py"):
        return
    prepare(session, True, STRENGTH)
    session.run("python", "scripts/strength.py", *session.posargs, env=offline_env())


@nox.session
def tests(session: nox.Session) -> None:
    """Run the project's own unit tests, `tests:` of oracle/judge.yaml (advisory to the gate)."""
    if helped(session, UNIT_TESTS):
        return
    prepare(session, project=True)
    # `tests:` read as the gate reads it: scripts/_gate/ needs PyYAML, which the session has.
    session.run("python", UNIT_TESTS, *session.posargs, env=offline_env())


@nox.session
def oracle(session: nox.Session) -> None:
    """Run the property oracles (oracle/test_*.py) on a build of the working tree, as the judge
    runs them: `nox -s oracle -- -k NAME` runs those whose name matches."""
    if helped(session, TRY_ORACLE):
        return
    prepare(session)  # the judge's tools only: the oracle's process never imports the project
    tool(session, TRY_ORACLE)


@nox.session
def allow(session: nox.Session) -> None:
    """Append a reviewed allowlist row naming the base it was reviewed against (see --help)."""
    if helped(session, "scripts/allow.py"):
        return
    prepare(session)
    tool(session, "scripts/allow.py")
