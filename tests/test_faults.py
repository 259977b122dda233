"""Under faults the judge says what happened, cleans up, and leaves no verdict that is not its
own (docs/faults.md): signals at several points of a real judgment, two judgments at once in
one checkout, a judgment killed outright, a tool missing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from _gate.core.checkout_lock import judging
from _gate.core.owned import OWNER
from _gate.judge.run_state import PREFIX, remove_leftovers
from _gate.runs.cassettes import load_cassette
from _gate.runs.reuse import CACHE_ENV, unsealed
from _gate.runs.sandbox import status_file

from tests.helpers import SCRIPTS, edits
from tools.bakery import OFFLINE, branch, git, judge

pytestmark = pytest.mark.e2e

D = "src/shop/discounts.py"
ANCHOR = "    amount = (discounted_cents - 1) * BPS_FULL // keep + 1\n"
REFACTOR = "    below = (discounted_cents - 1) * BPS_FULL\n    amount = below // keep + 1\n"
COMMENTED = "    # the least amount that rounds back up\n" + ANCHOR
BROKEN = "    amount = (discounted_cents - 1) * BPS_FULL // keep + 2\n"


@pytest.fixture(scope="module")
def honest(shop: Path) -> str:
    return branch(shop, "faults/refactor", edits((D, ANCHOR, REFACTOR)))


def judge_cmd(shop: Path, head: str, via_nox: bool) -> list[str]:
    if via_nox:
        return ["nox", "-s", "judge", "--", "--head", head]
    wheelhouse = os.environ["ORACLE_WHEELHOUSE"]
    return [sys.executable, "scripts/judge.py", "--wheelhouse", wheelhouse, "--head", head]


def start(shop: Path, cmd: list[str]) -> subprocess.Popen[str]:
    """A judgment in a session of its own, as a terminal's job is: Ctrl-C reaches its group."""
    return subprocess.Popen(
        cmd,
        cwd=shop,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **OFFLINE},
        start_new_session=True,
    )


def read_until(proc: subprocess.Popen[str], text: str) -> list[str]:
    """The lines `proc` printed up to the first holding `text` (all of them if none did)."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line.rstrip("\n"))
        if text in line:
            break
    return seen


def folders_of(root: int) -> list[Path]:
    """The judgment folders whose judge is `root` or a child of it (nox's judge)."""
    found = []
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            pid = int(json.loads((folder / OWNER).read_text("utf-8"))["pid"])
            stat = Path(f"/proc/{pid}/stat").read_text("utf-8")
        except (OSError, ValueError, KeyError):
            continue
        if root in (pid, int(stat.rpartition(")")[2].split()[1])):
            found.append(folder)
    return found


def processes_in(folder: Path) -> list[str]:
    """The processes whose command line or working folder lies in `folder`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode("utf-8", "replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(folder) in cmdline or cwd.startswith(str(folder)):
            found.append(f"{proc.name}: {cmdline!r}")
    return found


def worktrees(repo: Path) -> list[str]:
    listed = git(repo, "worktree", "list", "--porcelain")
    return [line for line in listed.splitlines() if line.startswith("worktree ")]


# Where a signal goes: after the judge's line holding this text, and the step the report names.
POINTS = {
    "after setup": ("judge: preconditions: ", "after the preconditions step"),
    "after the build": ("judge: build: ", "after the build step"),
}
# (via nox, the signal, sent to the judge's whole group as Ctrl-C is, the point)
INTERRUPTS = {
    "judge, SIGTERM, after setup": (False, signal.SIGTERM, False, "after setup"),
    "judge, Ctrl-C, in the lanes": (False, signal.SIGINT, True, "after the build"),
    "nox, SIGTERM to nox, in the lanes": (True, signal.SIGTERM, False, "after the build"),
    "nox, Ctrl-C, after setup": (True, signal.SIGINT, True, "after setup"),
    "nox, SIGHUP to nox, in the lanes": (True, signal.SIGHUP, False, "after the build"),
}


@pytest.mark.parametrize("how", INTERRUPTS.values(), ids=INTERRUPTS)
def test_a_signal_ends_a_judgment_cleanly(
    shop: Path, honest: str, how: tuple[bool, signal.Signals, bool, str]
) -> None:
    """Exit 2, one line naming the signal and where, a report saying so; no process, folder
    or worktree of the judgment left."""
    via_nox, number, group, point = how
    text, where = POINTS[point]
    proc = start(shop, judge_cmd(shop, honest, via_nox))
    before = read_until(proc, text)
    assert text in before[-1], before
    folders = folders_of(proc.pid)
    assert folders, before
    if group:
        os.killpg(proc.pid, number)
    else:
        proc.send_signal(number)
    rest, _ = proc.communicate(timeout=60)
    output = [*before, *rest.splitlines()]
    assert proc.returncode == 2, output
    said = [line for line in output if "interrupted by" in line]
    # nox, on any signal, stops its command with SIGTERM; a terminal's Ctrl-C reaches both.
    got = number.name if group or not via_nox else "SIGTERM"
    assert said == [f"judge: judge: error: interrupted by {got} {where}"], output
    assert not [line for line in output if "Traceback" in line], output
    report = json.loads((shop / "reports/judge-report.json").read_text("utf-8"))
    assert (report["verdict"], report["finished"]) == ("error", True)
    assert report["head"] == git(shop, "rev-parse", honest).strip()
    if via_nox:
        assert output[-1] == "nox > judge: error (exit 2): interrupted", output
    assert [folder for folder in folders if folder.exists()] == []
    assert [name for folder in folders for name in processes_in(folder)] == []
    assert len(worktrees(shop)) == 1, worktrees(shop)


def test_after_interruptions_a_judgment_gives_the_verdict_it_would_have(
    shop: Path, honest: str
) -> None:
    done = subprocess.run(
        judge_cmd(shop, honest, True), cwd=shop, capture_output=True, text=True, check=False
    )
    report = json.loads((shop / "reports/judge-report.json").read_text("utf-8"))
    assert (done.returncode, report["verdict"]) == (0, "merge"), done.stdout[-3000:]
    assert (len(report["judgment"]["id"]), report["finished"]) == (32, True)


def stale(shop: Path) -> None:
    """What an earlier judgment that said merge left in reports/."""
    reports = shop / "reports"
    reports.mkdir(exist_ok=True)
    earlier = {"verdict": "merge", "exit_code": 0, "head": "0" * 40, "steps": []}
    (reports / "judge-report.json").write_text(json.dumps(earlier), "utf-8")
    (reports / "judge-summary.md").write_text("# merge\n", "utf-8")
    (reports / "crossrun.json").write_text(json.dumps({"status": "pass"}), "utf-8")


def test_a_killed_judgment_leaves_no_earlier_verdict_and_the_next_removes_its_leftovers(
    shop: Path, tmp_path: Path
) -> None:
    """kill -9 runs no handler: the report says the judgment did not finish (never the earlier
    run's merge), and the folder and worktrees it left go with the next judgment."""
    stale(shop)
    head = branch(shop, "faults/broken", edits((D, ANCHOR, BROKEN)))
    proc = start(shop, judge_cmd(shop, head, False))
    before = read_until(proc, "judge: preconditions: ")
    folders = folders_of(proc.pid)
    assert folders, before
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    report = json.loads((shop / "reports/judge-report.json").read_text("utf-8"))
    assert (report["verdict"], report["exit_code"], report["finished"]) == ("error", 2, False)
    assert f"(pid {proc.pid}) has not finished" in report["summary"], report
    left = {path.name for path in (shop / "reports").iterdir()}
    assert not left & {"judge-summary.md", "crossrun.json"}, left
    assert all(folder.is_dir() for folder in folders)
    assert len(worktrees(shop)) > 1  # git worktree prune keeps them: their folders exist
    # A live judgment's folder stays (this test's process owns it).
    alive = Path(tempfile.mkdtemp(prefix=PREFIX))
    (alive / OWNER).write_text(json.dumps({"pid": os.getpid(), "start": ""}), "utf-8")
    try:
        removed = remove_leftovers(shop)
        assert set(folders) <= set(removed)
        assert alive.is_dir()
    finally:
        shutil.rmtree(alive)
    assert [folder for folder in folders if folder.exists()] == []
    assert len(worktrees(shop)) == 1, worktrees(shop)
    # A merge of shards refuses the unfinished report, naming it.
    shard, out = tmp_path / "shard", tmp_path / "merged"
    shutil.copytree(shop / "reports", shard)
    merged = subprocess.run(
        [sys.executable, "scripts/merge_shards.py", str(shard), str(shard), "--out", str(out)],
        cwd=shop,
        capture_output=True,
        text=True,
        check=False,
    )
    assert merged.returncode == 2, merged.stdout + merged.stderr
    assert "has not finished" in (out / "judge-report.json").read_text("utf-8")


HOLDS_STATUS = """
import time
from _gate.runs.sandbox import status_file
with status_file() as status:
    print(status.parent, flush=True)
    time.sleep(60)
"""


def test_a_status_folder_of_a_process_killed_outright_goes_with_the_next_judgment(
    shop: Path,
) -> None:
    """An interrupt kills a step's process with SIGKILL: the launcher's status folders it held
    stay, and the next judgment removes them; a live process's stays."""
    cmd = [sys.executable, "-c", HOLDS_STATUS]
    with subprocess.Popen(cmd, cwd=SCRIPTS, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        held = Path(proc.stdout.readline().strip())
        proc.kill()
    assert held.is_dir(), held
    with status_file() as mine:
        removed = remove_leftovers(shop)
        assert mine.parent.is_dir()
    assert held in removed
    assert not held.exists()


@pytest.mark.parametrize("same", [True, False], ids=["same head", "different heads"])
def test_two_judgments_at_once_in_one_checkout(shop: Path, honest: str, same: bool) -> None:
    """One judges; the other says which judgment is running and exits 2, touching nothing.
    Never nox's 1 of a failed environment, which reads as a block."""
    other = honest if same else branch(shop, "faults/comment", edits((D, ANCHOR, COMMENTED)))
    first = start(shop, judge_cmd(shop, honest, True))
    read_until(first, "nox > Running session judge")
    second = subprocess.run(
        judge_cmd(shop, other, True), cwd=shop, capture_output=True, text=True, check=False
    )
    out, _ = first.communicate(timeout=900)
    assert first.returncode == 0, out[-3000:]
    said = (second.stdout + second.stderr).strip().splitlines()
    assert second.returncode == 2, said
    assert said[-1].startswith("nox > judge: error (exit 2): another judgment is running"), said
    assert f"--head {honest}" in said[-1]
    report = json.loads((shop / "reports/judge-report.json").read_text("utf-8"))
    assert (report["verdict"], report["head"]) == ("merge", git(shop, "rev-parse", honest).strip())


def test_judgments_started_at_the_same_instant_again_and_again(shop: Path, honest: str) -> None:
    """Started together, one takes the checkout and the other says so (exit 2); the one that
    judges is then stopped (exit 2, interrupted). Never a 1, which would read as a block."""
    other = branch(shop, "faults/again", edits((D, ANCHOR, COMMENTED)))
    for heads in ((honest, honest), (honest, other), (other, honest)):
        both = [start(shop, judge_cmd(shop, head, True)) for head in heads]
        loser = None
        while loser is None:
            time.sleep(0.05)
            loser = next((proc for proc in both if proc.poll() is not None), None)
        winner = next(proc for proc in both if proc is not loser)
        said, _ = loser.communicate(timeout=60)
        assert loser.returncode == 2, said
        assert "another judgment is running in this checkout" in said.splitlines()[-1], said
        read_until(winner, "nox > Running session judge")
        winner.send_signal(signal.SIGTERM)
        out, _ = winner.communicate(timeout=120)
        assert winner.returncode in (0, 2), out[-2000:]
    assert len(worktrees(shop)) == 1


def test_a_judge_environment_nox_cannot_make_exits_2_not_1(shop: Path) -> None:
    """nox ends 1 for a session it could not set up (a file where the environment goes, a
    second judgment's `uv venv` in a folder being made), and 1 is `block`."""
    env_path = shop / ".nox/judge"
    shutil.rmtree(env_path, ignore_errors=True)
    env_path.parent.mkdir(exist_ok=True)
    env_path.write_text("not an environment", "utf-8")
    try:
        done = subprocess.run(
            judge_cmd(shop, "main", True), cwd=shop, capture_output=True, text=True, check=False
        )
    finally:
        env_path.unlink()
    said = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2, said
    assert said[-1] == (
        "nox > judge: error (exit 2): nox could not prepare the judge's environment (see "
        "above); nothing was judged"
    ), said


@pytest.mark.parametrize("ci", [False, True], ids=["a user's machine", "CI"])
def test_a_missing_interpreter_for_the_judge_is_named_and_exits_2(shop: Path, ci: bool) -> None:
    """nox skips a session whose interpreter it cannot find (exit 0: merge) on a user's machine
    and fails it (1: block) on CI."""
    env = {name: value for name, value in os.environ.items() if name != "CI"}
    done = subprocess.run(
        ["nox", "-s", "judge", "--force-python", "3.99", "--", "--head", "main"],
        cwd=shop,
        capture_output=True,
        text=True,
        env={**env, **OFFLINE, **({"CI": "true"} if ci else {})},
        check=False,
    )
    said = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2, said
    assert any("Python interpreter 3.99 not found" in line for line in said), said
    assert said[-1].startswith("nox > judge: error (exit 2): nox could not prepare"), said


NOX_LINES: dict[str, bool] = {
    "": True,  # the default sessions: the judge
    "-s judge": True,
    "--session=judge": True,
    "-s tests judge": True,
    "--sessions tests,judge": True,
    "-sjudge": True,
    "-k jud": True,  # a keyword may pick it
    "-s tests": False,
    "-s merge -- --head judge": False,
    "-l": False,
    "-s judge --list": False,
}


@pytest.mark.fast
@pytest.mark.parametrize("line", NOX_LINES, ids=[line or "nox" for line in NOX_LINES])
def test_which_nox_command_lines_take_the_judgment_lock(line: str) -> None:
    assert judging(line.split(), {}, ["judge"]) is NOX_LINES[line]


@pytest.mark.fast
def test_noxsession_names_the_sessions_when_no_option_does() -> None:
    assert judging([], {"NOXSESSION": "tests"}, ["judge"]) is False
    assert judging([], {"NOXSESSION": "tests,judge"}, ["judge"]) is True
    assert judging(["-s", "tests"], {"NOXSESSION": "judge"}, ["judge"]) is False


def test_git_missing_from_the_start_is_named(shop: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    done = subprocess.run(
        ["python", "scripts/judge.py", "--head", "main"],
        cwd=shop,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(bare)},
        check=False,
    )
    report: dict[str, Any] = json.loads((shop / "reports/judge-report.json").read_text("utf-8"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "git is not installed or not on PATH; install git" in done.stdout
    assert "internal error" not in done.stdout
    assert report["verdict"] == "error"


def flipped(path: Path) -> None:
    """One byte of `path` changed, in its middle."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    path.write_bytes(bytes(data))


def test_kept_state_changed_since_it_was_written_is_named_and_computed_again(
    shop: Path, honest: str, tmp_path: Path
) -> None:
    """A byte flipped in each kept run, environment digest and recording: each the judgment
    reads is named, not used and kept again; the verdict is the one it gives without them."""
    env = {CACHE_ENV: str(tmp_path / "cache")}
    first = judge(shop, "--head", honest, env=env)
    assert first.report["verdict"] == "merge", first.output[-3000:]
    cache = tmp_path / "cache"
    runs = sorted(path for path in cache.glob("*.json") if b'"outcomes"' in path.read_bytes())
    digests = sorted(cache.glob("envs/*/digest.json"))
    recording = shop / ".oracle/cassettes" / first.report["base"] / "cassettes.json"
    assert (len(runs), len(digests)) == (3, 3), sorted(cache.rglob("*.json"))
    for path in (*runs, *digests, recording):
        flipped(path)
    second = judge(shop, "--head", honest, env=env)
    assert second.report["verdict"] == "merge", second.output[-3000:]
    said = [line.split("kept: ", 1)[1] for line in second.output.splitlines() if "kept: " in line]
    named = {line.split(" changed since it was written: ")[0] for line in said}
    read = named & set(map(str, runs))
    assert named - read == {str(recording), *map(str, digests)}, said
    # The parent's oracle and crossrun runs; the patch's is kept for a base it may become.
    assert len(read) == 2, said
    for path in (*digests, *map(Path, read)):  # kept again, whole
        assert unsealed(path.read_bytes()) is not None, path
    assert load_cassette(recording) is not None


@pytest.fixture
def pinned(tmp_path: Path) -> tuple[Path, Path, str]:
    """A one-wheel set: where pip finds the wheel (the package index's stand-in), its pinned
    requirements file, and the wheel's name."""
    wheel = next(Path(os.environ["ORACLE_WHEELHOUSE"]).glob("iniconfig-*.whl"))
    index = tmp_path / "index"
    index.mkdir()
    shutil.copy(wheel, index)
    version = wheel.name.split("-")[1]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"iniconfig=={version} --hash=sha256:{digest}\n", "utf-8")
    return index, requirements, wheel.name


def fill(dest: Path, requirements: Path, index: Path | None) -> tuple[int, str, dict[str, Any]]:
    report = dest.parent / "wheelhouse.json"
    links = {"PIP_FIND_LINKS": str(index)} if index else {}
    cmd = [sys.executable, str(SCRIPTS / "wheelhouse.py"), "--requirements", str(requirements)]
    done = subprocess.run(
        [*cmd, "--dest", str(dest), "--report", str(report)],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_NO_INDEX": "1", **links},
        check=False,
    )
    return done.returncode, done.stderr, json.loads(report.read_text("utf-8"))


@pytest.mark.fast
def test_a_wheel_changed_in_a_complete_wheelhouse_is_fetched_again(
    tmp_path: Path, pinned: tuple[Path, Path, str]
) -> None:
    index, requirements, name = pinned
    dest = tmp_path / "wheelhouse"
    assert fill(dest, requirements, index)[0] == 0
    good = (dest / name).read_bytes()
    flipped(dest / name)
    code, said, _ = fill(dest, requirements, index)
    assert code == 0, said
    assert f"wheelhouse: {name} changed since downloaded: deleted, fetched again" in said
    assert (dest / name).read_bytes() == good
    # Where the index cannot be reached: named, with the session that fetches it.
    flipped(dest / name)
    code, said, report = fill(dest, requirements, None)
    assert code == 2, said
    assert report["summary"].startswith(f"{name} changed since it was downloaded and was deleted")
    assert "`nox -s wheelhouse` fills it" in report["summary"]
    assert not (dest / name).exists()
