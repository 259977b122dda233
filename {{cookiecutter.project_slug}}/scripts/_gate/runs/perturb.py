"""Perturbed runs of a case (docs/perturbation.md): the same case in an environment that looks
like a user's, not the gate's, run identically on the parent build and the patch build.

Code can tell the gate's fixed environment apart from a user's (an empty HOME under the
temporary directory, `TZ=UTC`, pipes, today's date) and behave well only there. Each
perturbation changes one such thing, for both builds alike, so honest dependence on the
environment costs nothing: only a difference between the two builds under it counts.

- `env`: a user's environment. A HOME with ordinary dotfiles and folders, the working directory
  a project folder in it, outside the temporary directory; the variables a login shell has
  (USER, SHELL, LANG, TERM, a time zone other than UTC) and none the gate alone sets
  (NO_COLOR, COLUMNS, PYTHONHASHSEED, PYTHONDONTWRITEBYTECODE); TMPDIR a folder of the
  system's temporary directory, as /tmp is a user's.
- `clock`: the clock more than a year ahead, on a Saturday, below Python (libfaketime).
- `terminal`: stdout on a pseudo-terminal (stdin too when the case pipes nothing), colour
  allowed; output is compared with what a terminal adds (escape sequences, CR) taken out.
- `files`: decoy files in HOME, the working directory and its parent, which the run may
  write; every file it created, changed or deleted there is a compared field (`files.touched`),
  a bytecode cache by its name alone.
"""

from __future__ import annotations

import argparse
import functools
import glob
import hashlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from _gate.core.config import PERTURBATIONS
from _gate.core.protocol import FailClosed
from _gate.plugin.patch_env import gate_env, search_path
from _gate.runs.process import Stream, run_group

TOUCHED = "files.touched"  # the compared field of what a run did to the files around it
# The compared fields of a watched run (confine.Watching): the addresses it tried to reach
# beyond its scratch (the network, a machine's service), and what it typed into a terminal.
REACHED, TYPED = "network.reached", "terminal.typed"
FAKETIME_NAMES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
USER = "alex"
USER_ENV = {
    "USER": USER,
    "LOGNAME": USER,
    "SHELL": "/bin/bash",
    "LANG": "en_US.UTF-8",
    "TERM": "xterm-256color",
}
ZONE = "America/New_York"
# The same zone as a POSIX rule, which the C library reads without zone files: on a machine
# without tzdata (slim container images) the named zone would run as UTC, the gate's own.
ZONE_RULE = "EST5EDT,M3.2.0,M11.1.0"
# An ordinary HOME: what a user's has, and what a run may read, change or delete.
DOTFILES = {
    ".bashrc": "export EDITOR=vim\nalias ll='ls -l'\n",
    ".profile": "[ -f ~/.bashrc ] && . ~/.bashrc\n",
    ".gitconfig": f"[user]\n\tname = {USER}\n\temail = {USER}@example.org\n",
    ".config/app/settings.json": '{"theme": "dark"}\n',
    "Documents/notes.txt": "call the bank\n",
    "Documents/budget.json": '{"rent": 1200}\n',
    "Downloads/statement-2031-03.pdf": "%PDF-1.7\n",
}
PROJECT = "projects/acme"  # the working directory, under HOME
NEIGHBOURS = {"projects/README.md": "# projects\n", "projects/ledger.json": '{"total": 3}\n'}
DECOYS = {"notes.json": '{"keep": true}\n'}  # in the working directory itself
UNAVAILABLE_CLOCK = "libfaketime not found: apt-get install faketime, or set ORACLE_LIBFAKETIME"
ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-B]")


def shifted_clock(today: date) -> str:
    """libfaketime's start: the first Saturday at least 400 days ahead, mid-morning."""
    day = today + timedelta(days=400)
    day += timedelta(days=(5 - day.weekday()) % 7)
    return f"@{day.isoformat()} 10:30:00"


def libfaketime() -> str | None:
    """The library's path: ORACLE_LIBFAKETIME, else where distributions install it (looked up
    for every clock run, so the known places first)."""
    named = os.environ.get("ORACLE_LIBFAKETIME")
    if named:  # absolute: the runs it is preloaded into start in folders of their own
        return os.path.abspath(named) if os.path.isfile(named) else None
    found = (path for path in FAKETIME_NAMES if os.path.isfile(path))
    return next(found, None) or next(iter(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")), None)


def names(text: str) -> list[str]:
    """`--perturb env,clock`: a comma-separated list of perturbations ("" for none)."""
    found = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in found if name not in PERTURBATIONS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown perturbation {unknown[0]!r}; known: {', '.join(PERTURBATIONS)}"
        )
    return found


def add_perturb_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--perturb",
        type=names,
        default=list(PERTURBATIONS),
        help="perturbations to run cases under, comma-separated ('' for none; default "
        f"{','.join(PERTURBATIONS)})",
    )
    p.add_argument(
        "--perturb-required",
        type=names,
        default=[],
        help="of those, the ones that fail closed where this machine cannot run them",
    )


def runnable(wanted: Sequence[str], required: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The perturbations of `wanted` this machine can run, and why each other cannot; one that
    is `required` and cannot run fails closed."""
    why = unavailable(wanted)
    missing = [name for name in required if name in why]
    if missing:
        raise FailClosed(
            f"{missing[0]} perturbation: unavailable ({why[missing[0]]}); oracle/judge.yaml "
            "perturb_required lists it"
        )
    return [name for name in wanted if name not in why], why


def unavailable(names: Sequence[str]) -> dict[str, str]:
    """Why each of `names` cannot run on this machine (none: every one can)."""
    why = {}
    library = libfaketime() if "clock" in names else ""
    if library is None:
        why["clock"] = UNAVAILABLE_CLOCK
    elif library and (failed := unshifted(library)):
        why["clock"] = f"{library} does not shift the clock: {failed}"
    if "terminal" in names and not hasattr(os, "openpty"):
        why["terminal"] = "this platform has no pseudo-terminals"
    return why


@functools.cache
def unshifted(library: str) -> str:
    """Why `library` does not start a process's clock where FAKETIME says ('' when it does).
    The loader ignores a preload it cannot load (not a library, another architecture's) with
    a warning, and the runs under the shifted clock would see today while said perturbed."""
    probe = [sys.executable, "-I", "-S", "-c", "import time; print(time.gmtime().tm_year)"]
    env = {**faketime_variables(library, "@2001-02-03 04:05:06"), "PATH": os.defpath}
    done = run_group(probe, timeout=30, env=env)  # the gate's own interpreter, a fixed program
    year = done.stdout.tail().strip()
    if done.exit_code == 0 and year == "2001":
        return ""
    said = done.stderr.tail().strip().splitlines()
    return said[0] if said else f"a process under it read the year {year!r}"


@dataclass(frozen=True)
class Perturbation:
    """One perturbed run's environment: some of PERTURBATIONS at once, and the shifted clock's
    start (fixed by the recording, so record and replay see the same date)."""

    names: tuple[str, ...]
    clock: str = ""

    def __str__(self) -> str:
        return "+".join(self.names)


@dataclass
class Scene:
    """Where one perturbed run happens and how it starts."""

    home: Path
    work: Path
    writable: tuple[Path, ...]
    env: dict[str, str]
    tty: tuple[int, ...] = ()  # the command's fds on a terminal (sandbox.run_confined)
    watched: Path | None = None  # the folder whose files `files.touched` compares
    elsewhere: tuple[Path, ...] = ()  # folders made outside the run's own, removed after it
    # The run's HOME shown at the user's own (passwd_home): (home, where the run sees it).
    bind: tuple[tuple[Path, Path], ...] = ()

    @property
    def cwd(self) -> Path:
        """The working directory as the run sees it (under its HOME's place, where bound)."""
        for source, target in self.bind:
            if self.work.is_relative_to(source):
                return target / self.work.relative_to(source)
        return self.work


# Perturbed runs per case: a user at a terminal today, and a user's script (pipes) more than a
# year later. Together with the gate's own run (pipes, today, its fixed environment) they vary
# each signal against the others; one run per perturbation would cost twice as much.
RUNS = (("env", "terminal", "files"), ("env", "files", "clock"))


def planned(enabled: Sequence[str], clock: str) -> list[Perturbation]:
    """The perturbed runs a case gets, given the perturbations it runs under."""
    found: list[Perturbation] = []
    for run in RUNS:
        names = tuple(name for name in run if name in enabled)
        if names and all(other.names != names for other in found):
            found.append(Perturbation(names, clock if "clock" in names else ""))
    return found


def user_root() -> Path:
    """A folder outside the temporary directory, as a user's projects are."""
    for root in (Path.home() / ".cache" / "workspaces", Path(tempfile.gettempdir())):
        try:
            root.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(dir=root))
        except OSError:
            continue
    raise FailClosed("perturbation env: no folder for a user-like HOME could be made")


def write_files(root: Path, files: Mapping[str, str]) -> None:
    """Write each file that is not there yet: a decoy never replaces a case's fixture."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(path):
            path.write_text(text, "utf-8")


def make_work(work: Path, cwd: str | None, fixtures: Path) -> None:
    if cwd:
        shutil.copytree(fixtures / cwd, work, symlinks=True)
    else:
        work.mkdir(parents=True)


# A bytecode cache the import system writes beside a module the run imported from its folder
# (`flask --app hello` imports ./hello.py): its bytes hold that file's absolute path and
# mtime, which differ from run to run. It is compared by name alone.
BYTECODE = "bytecode"


def snapshot(root: Path) -> dict[str, str]:
    """Every regular file and symlink under `root`, by digest (a link by its target, a
    bytecode cache as BYTECODE)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = "link:" + os.readlink(path)
        elif path.is_file() and path.suffix == ".pyc" and path.parent.name == "__pycache__":
            found[rel] = BYTECODE
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def touched(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """What a run did to the files it could reach: each created or changed file by its new
    digest, each deleted one as `deleted`."""
    done = {rel: digest for rel, digest in after.items() if before.get(rel) != digest}
    done.update({rel: "deleted" for rel in before if rel not in after})
    return dict(sorted(done.items()))


def terminal_output(stream: Stream) -> Stream:
    """stdout as a pipe would have carried it: the escape sequences and carriage returns a
    terminal adds taken out, so colour that both builds print is equal."""
    if stream.truncated:
        return stream
    text = ESCAPES.sub(b"", stream.head).replace(b"\r\n", b"\n").replace(b"\r", b"")
    return Stream(text, hashlib.sha256(text).hexdigest(), len(text))


@dataclass(frozen=True)
class Setting:
    """What a case brings to its scene: its environment as the gate runs it (the fixed
    variables and its own), the variables it pins itself, its fixture folder, its input."""

    gate_env: Mapping[str, str]
    pinned: Mapping[str, str]
    cwd: str | None
    fixtures: Path
    bin_dir: Path
    stdin_piped: bool


def scene(how: Perturbation, case: Setting, root: Path, shown: Path | None = None) -> Scene:
    """The scene of one perturbed run, in the empty folder `root`: each perturbation of `how`
    applied to the gate's own scene (an empty HOME and working directory under `root`).
    `shown`: where a user's HOME is shown to the run (passwd_home), if anywhere."""
    if "env" in how.names:
        stage = user_scene(case, shown)
    else:
        # HOME and the working directory side by side, as the gate's own run has them; TMPDIR
        # beside their folder, so temporary files are never what the run touched.
        home, work, tmp = root / "scene" / "home", root / "scene" / "work", root / "tmp"
        home.mkdir(parents=True)
        tmp.mkdir()
        make_work(work, case.cwd, case.fixtures)
        env = {k: v for k, v in case.gate_env.items() if k != "HOME"}
        env.update(HOME=str(home), TMPDIR=str(tmp))
        stage = Scene(home, work, (root,), env)
    if "files" in how.names:
        write_files(stage.home, {".bashrc": DOTFILES[".bashrc"], **DECOYS})
        write_files(stage.work, DECOYS)
        write_files(stage.work.parent, {"ledger.json": NEIGHBOURS["projects/ledger.json"]})
        stage.watched = stage.work.parent if "env" not in how.names else stage.home
    if "clock" in how.names:
        stage.env.update(clock_env(how.clock))
    if "terminal" in how.names:
        stage.env.pop("NO_COLOR", None)  # a terminal is where colour is welcome
        stage.env["TERM"] = case.pinned.get("TERM", "xterm-256color")
        stage.tty = (1,) if case.stdin_piped else (0, 1)
    return stage


def clock_env(clock: str) -> dict[str, str]:
    """The variables that start a process's clock at `clock` (libfaketime below Python)."""
    library = libfaketime()
    if library is None:
        raise FailClosed(f"clock perturbation: unavailable ({UNAVAILABLE_CLOCK})")
    return faketime_variables(library, clock)


def faketime_variables(library: str, clock: str) -> dict[str, str]:
    # Monotonic time stays real: timeouts and durations, the gate's and pytest's, do too. So
    # a timed wait on a monotonic clock needs no fix, and libfaketime's own (on by default
    # where the C library is recent) makes threads that contend for a lock wait for each other
    # at length: a test of more-itertools took over 200 s with it, 11 s without.
    return {
        "LD_PRELOAD": library,
        "FAKETIME": clock,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
    }


def process_scene(
    how: Perturbation, gate_env: Mapping[str, str], bin_dir: Path, root: Path
) -> Scene:
    """The scene under `how` of a process that is not a case (the oracle's subject worker),
    whose own environment is `gate_env`, in the empty folder `root`."""
    return scene(how, Setting(gate_env, {}, None, root, bin_dir, stdin_piped=True), root)


def user_zone(zoneinfo: Path = Path("/usr/share/zoneinfo")) -> str:
    """A user's TZ: the zone by its name where the C library finds its file, else its rule."""
    return ZONE if (zoneinfo / ZONE).is_file() else ZONE_RULE


def user_scene(case: Setting, shown: Path | None = None) -> Scene:
    """A login shell's environment in a project folder of an ordinary HOME, outside the
    temporary directory; what the case pins stays pinned (its TZ, its locale). With `shown`
    (the user's own HOME, passwd_home), the run sees that HOME there, under the user's
    name: the launcher binds it at that path in the job's mount namespace, so code that
    tells a real HOME from the gate's by the user database sees a real one."""
    outside, home, tmp = user_home()
    work = home / PROJECT
    make_work(work, case.cwd, case.fixtures)
    seen = shown or home
    env = {**user_variables(seen, tmp, case.bin_dir), "PWD": str(seen / PROJECT)}
    if shown is not None:
        name = passwd_name()
        env.update(USER=name, LOGNAME=name)
    env.update(case.pinned)
    bind = ((home, shown),) if shown is not None else ()
    return Scene(home, work, (seen, tmp), env, elsewhere=(outside, tmp), bind=bind)


def passwd_home() -> Path | None:
    """The HOME the user database gives this user, where a run may be shown a HOME of its
    own (an existing folder, not the root); None elsewhere."""
    import pwd

    try:
        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None
    return home if home.is_dir() and home.resolve() != Path("/") else None


def passwd_name() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def user_home() -> tuple[Path, Path, Path]:
    """An ordinary HOME, with its dotfiles and folders, in a folder of its own outside the
    temporary directory, and a TMPDIR: that folder (removed after the run), HOME, TMPDIR.
    A user's /tmp is writable and a confined run's is not: without a TMPDIR of its own,
    tempfile would fall back to the working directory, which no user's does."""
    outside = user_root()
    home = outside / USER
    write_files(home, {**DOTFILES, **NEIGHBOURS})
    return outside, home, Path(tempfile.mkdtemp())


def user_variables(home: Path, tmp: Path, bin_dir: Path) -> dict[str, str]:
    """What a login shell of a user exports (_gate/plugin/patch_env.py's list in their scene): their
    name, shell, locale, terminal type and zone, HOME and TMPDIR, and PATH with `bin_dir`
    (the build's scripts) first."""
    env = {**USER_ENV, "TZ": user_zone(), "HOME": str(home), "TMPDIR": str(tmp)}
    return {**env, "PATH": search_path(bin_dir)}


@dataclass(frozen=True)
class TestsScene:
    """The variables of a pytest run under a perturbation (None: the gate's own, which the
    run makes itself) and the folders of its scene it may write."""

    env: dict[str, str] | None
    writable: tuple[Path, ...]


@contextmanager
def tests_scene(how: Perturbation | None, bin_dir: Path) -> Iterator[TestsScene]:
    """A pytest run's scene under `how` (the crossrun's perturbed run): a user's variables
    and HOME where it has `env`, the gate's in a folder of its own where it does not, the
    shifted clock where it has `clock`; its folders removed afterwards. Its working directory
    stays the run's (the tests' root). `bin_dir`: the build's scripts folder."""
    if how is None:
        yield TestsScene(None, ())
        return
    made: tuple[Path, ...]
    writable: tuple[Path, ...]
    if "env" in how.names:
        outside, home, tmp = user_home()
        env, made, writable = user_variables(home, tmp, bin_dir), (outside, tmp), (home, tmp)
    else:
        folder = Path(tempfile.mkdtemp(prefix="oracle-scene-"))
        env, made, writable = gate_env(folder, folder, bin_dir), (folder,), (folder,)
    if "clock" in how.names:
        env.update(clock_env(how.clock))
    try:
        yield TestsScene(env, writable)
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
