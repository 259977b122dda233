"""Cassettes on programs nobody here wrote, and on CLIs built to misbehave.

record_cassettes.py and replay_cassettes.py run as subprocesses, exactly as the judge runs them,
against real executables: two releases of tabulate from the package index, and small scripts
that print timestamps, hang, flood, emit bytes that are not UTF-8, or write files.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _gate.runs.process
import pytest
import yaml
from _gate.runs.cases import load_cases
from _gate.runs.cassettes import parent_now

from tests.helpers import SCRIPTS, running


@dataclass
class Step:
    code: int
    report: dict[str, Any]
    stderr: str

    @property
    def evidence(self) -> dict[str, Any]:
        return dict(self.report["evidence"])


def step(script: str, tmp: Path, *args: str | Path) -> Step:
    report = tmp / f"{script}.{time.monotonic_ns()}.json"
    cmd = [sys.executable, str(SCRIPTS / script), *map(str, args), "--report", str(report)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return Step(proc.returncode, json.loads(report.read_text()), proc.stderr)


def write_cases(tmp: Path, cases: list[dict[str, Any]]) -> Path:
    path = tmp / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": cases}))
    return path


def record(
    tmp: Path, command: Path, cases: Path, fixtures: Path | None = None
) -> tuple[Step, Path]:
    out = tmp / "cassettes.json"
    where = ("--fixtures", fixtures or tmp)
    result = step(
        "record_cassettes.py",
        tmp,
        "--command",
        command,
        "--base",
        "b" * 40,
        "--out",
        out,
        "--cases",
        cases,
        *where,
    )
    return result, out


def replay(
    tmp: Path,
    cassette: Path,
    parent: Path,
    patch: Path,
    cases: Path,
    allow: list[dict[str, str]] | None = None,
    extra: tuple[str | Path, ...] = (),
) -> Step:
    allowlist = tmp / "allowlist.yaml"
    allowlist.write_text(yaml.safe_dump({"allow": allow or []}))
    commands = ("--parent-command", parent, "--patch-command", patch)
    return step(
        "replay_cassettes.py",
        tmp,
        "--cassette",
        cassette,
        *commands,
        "--cases",
        cases,
        "--allowlist",
        allowlist,
        "--fixtures",
        tmp,
        *extra,
    )


def cli(tmp: Path, name: str, body: str) -> Path:
    """An executable Python script: a CLI with exactly the behaviour the test needs."""
    path = tmp / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


# --- a real CLI, two real releases -----------------------------------------------------------

TABLE = "name qty\nmug 3\npen 12\n"
FLOATS = "x y\n1.5 2.25\n10 0.125\n"


def tabulate_case(
    case_id: str,
    *argv: str,
    stdin: str = TABLE,
    compare: tuple[str, ...] = ("exit_code", "stdout.raw"),
) -> dict[str, Any]:
    return {"id": case_id, "argv": list(argv), "stdin": stdin, "compare": list(compare)}


TABULATE_CASES = [
    tabulate_case("simple", "-1"),
    tabulate_case("grid", "-1", "-f", "grid"),
    tabulate_case("pipe-floats", "-1", "-f", "pipe", "-F", ".3f", stdin=FLOATS),
    tabulate_case("plain", "-f", "plain"),
    tabulate_case("tsv", "-1", "-f", "tsv"),
    tabulate_case("rst", "-1", "-f", "rst"),
    tabulate_case(
        "to-file",
        "-1",
        "-f",
        "grid",
        "-o",
        "table.txt",
        compare=("exit_code", "stdout.raw", "files:*.txt"),
    ),
    tabulate_case("unknown-format", "-f", "no-such-format", compare=("exit_code",)),
    # tabulate 0.9.0: "New output formats: asciidoc, various *grid and *outline formats."
    tabulate_case("asciidoc", "-1", "-f", "asciidoc"),
    tabulate_case("rounded-grid", "-1", "-f", "rounded_grid"),
    tabulate_case("simple-outline", "-1", "-f", "simple_outline"),
]
# What the 0.9.0 changelog says changed for these inputs: the new formats exist; nothing else.
CHANGED_IN_0_9_0 = {
    (case_id, field)
    for case_id in ("asciidoc", "rounded-grid", "simple-outline")
    for field in ("exit_code", "stdout.raw")
}


@pytest.fixture(scope="module")
def tabulate(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """tabulate 0.8.10 and 0.9.0 from the package index, each in its own environment."""
    root = tmp_path_factory.mktemp("tabulate")
    commands = {}
    for version in ("0.8.10", "0.9.0"):
        env = root / version
        subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(env)], check=True)
        install = [
            "uv",
            "pip",
            "install",
            "-q",
            "--python",
            str(env / "bin/python"),
            f"tabulate=={version}",
        ]
        subprocess.run(install, check=True)
        commands[version] = env / "bin" / "tabulate"
    return commands


def test_real_cli_release_differs_exactly_where_its_changelog_says(
    tmp_path: Path, tabulate: dict[str, Path]
) -> None:
    cases = write_cases(tmp_path, TABULATE_CASES)
    recorded, cassette = record(tmp_path, tabulate["0.8.10"], cases)
    assert recorded.code == 0, recorded.stderr
    assert recorded.evidence["unstable"] == []
    result = replay(tmp_path, cassette, tabulate["0.8.10"], tabulate["0.9.0"], cases)
    assert result.code == 1
    found = {(m["id"], m["field"]) for m in result.evidence["mismatches"]}
    assert found == CHANGED_IN_0_9_0
    assert result.evidence["drift"] == []
    rounded = next(
        m
        for m in result.evidence["mismatches"]
        if m["id"] == "rounded-grid" and m["field"] == "stdout.raw"
    )
    assert "╭" in rounded["patch"]
    assert "+++ patch" in rounded["diff"]


def test_same_release_replays_clean(tmp_path: Path, tabulate: dict[str, Path]) -> None:
    cases = write_cases(tmp_path, TABULATE_CASES)
    _, cassette = record(tmp_path, tabulate["0.9.0"], cases)
    result = replay(tmp_path, cassette, tabulate["0.9.0"], tabulate["0.9.0"], cases)
    assert result.code == 0, result.report["summary"]
    assert result.evidence["mismatches"] == []


# --- CLIs built to misbehave ---------------------------------------------------------------

CLOCK = """
import json, sys, time
print(json.dumps({"now": time.time_ns(), "count": int(sys.argv[1])}))
print(f"took {time.perf_counter_ns()} ns", file=sys.stderr)
"""


def test_timestamp_is_unstable_at_record_and_never_blocks(tmp_path: Path) -> None:
    clock = cli(tmp_path, "clock", CLOCK)
    pointers = ["stdout.json.pointer:/now", "stdout.json.pointer:/count"]
    cases = write_cases(
        tmp_path, [{"id": "clock", "argv": ["3"], "compare": ["exit_code", *pointers]}]
    )
    recorded, cassette = record(tmp_path, clock, cases)
    assert recorded.code == 0
    [unstable] = recorded.evidence["unstable"]
    assert unstable["id"] == "clock"
    assert unstable["field"] == "stdout.json.pointer:/now"
    first, second = unstable["values"]
    assert isinstance(first, int)
    assert first != second
    assert recorded.evidence["proposals"][0]["field"] == "stdout.json.pointer:/now"
    result = replay(tmp_path, cassette, clock, clock, cases)
    assert result.code == 0
    assert "1 unstable fields not compared" in result.report["summary"]
    patched = cli(tmp_path, "clock2", CLOCK.replace("int(sys.argv[1])", "int(sys.argv[1]) + 1"))
    changed = replay(tmp_path, cassette, clock, patched, cases)
    assert changed.code == 1
    assert [m["field"] for m in changed.evidence["mismatches"]] == ["stdout.json.pointer:/count"]


def test_noise_regex_normalizes_identically_at_record_and_replay(tmp_path: Path) -> None:
    clock = cli(tmp_path, "clock", CLOCK)
    noise = [
        {"regex": "took [0-9]+ ns", "replace": "took N ns", "stream": "stderr"},
        {"pointer": "/now"},
    ]
    case = {"id": "clock", "argv": ["1"], "compare": ["stderr.raw", "stdout.json"], "noise": noise}
    cases = write_cases(tmp_path, [case])
    recorded, cassette = record(tmp_path, clock, cases)
    assert recorded.evidence["unstable"] == []
    fields = json.loads(cassette.read_text())["cases"]["clock"]["fields"]
    assert fields == {"stderr.raw": "took N ns\n", "stdout.json": {"now": "<noise>", "count": 1}}
    assert replay(tmp_path, cassette, clock, clock, cases).code == 0


HANG = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
print("started", flush=True)
time.sleep(300)
"""


def test_hanging_cli_times_out_and_its_process_group_dies(tmp_path: Path) -> None:
    hang = cli(tmp_path, "hang", HANG)
    token = f"grandchild-of-{tmp_path.name}"  # in its command line: found by it, not by a file
    case = {
        "id": "hang",
        "argv": [token],
        "timeout": 1,
        "compare": ["exit_code", "stdout.raw"],
    }
    recorded, cassette = record(tmp_path, hang, write_cases(tmp_path, [case]))
    assert recorded.code == 0
    assert recorded.evidence["crashed"] == ["hang"]
    saved = json.loads(cassette.read_text())["cases"]["hang"]
    assert saved["fields"] == {"exit_code": "timeout", "stdout.raw": "started\n"}
    assert saved["run"]["timed_out"] is True
    assert saved["run"]["signal"] == 9
    assert not running(token)


FLOOD = """
import sys
sys.stdout.buffer.write(b"x" * int(sys.argv[1]))
"""


def test_output_over_the_cap_is_kept_as_digest_and_head(tmp_path: Path) -> None:
    flood = cli(tmp_path, "flood", FLOOD)
    size = 3 * 1024 * 1024 + 5
    cases = write_cases(
        tmp_path, [{"id": "flood", "argv": [str(size)], "compare": ["stdout.raw", "stdout.sha256"]}]
    )
    recorded, cassette = record(tmp_path, flood, cases)
    assert recorded.code == 0
    fields = json.loads(cassette.read_text())["cases"]["flood"]["fields"]
    digest = hashlib.sha256(b"x" * size).hexdigest()
    assert fields["stdout.sha256"] == digest
    assert fields["stdout.raw"] == {
        "$truncated": True,
        "sha256": digest,
        "head": "x" * 4096,
        "bytes": size,
    }
    assert cassette.stat().st_size < 64 * 1024


BYTES = """
import sys
sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]) + b" ok\\n")
"""


def test_non_utf8_output_is_compared_as_bytes_and_shown_escaped(tmp_path: Path) -> None:
    raw = cli(tmp_path, "raw", BYTES)
    cases = write_cases(
        tmp_path, [{"id": "bytes", "argv": ["fffe"], "compare": ["exit_code", "stdout.raw"]}]
    )
    recorded, cassette = record(tmp_path, raw, cases)
    assert recorded.code == 0
    patched = cli(tmp_path, "raw2", BYTES.replace("bytes.fromhex(sys.argv[1])", 'b"\\xff\\xfd"'))
    result = replay(tmp_path, cassette, raw, patched, cases)
    assert result.code == 1
    [mismatch] = result.evidence["mismatches"]
    assert mismatch["parent"]["head"] == "\\xff\\xfe ok\n"
    assert mismatch["patch"]["head"] == "\\xff\\xfd ok\n"
    assert mismatch["parent"]["$non_utf8"] is True


WRITER = """
import pathlib, sys
pathlib.Path("out").mkdir()
pathlib.Path("out/report.txt").write_text(sys.argv[1])
pathlib.Path("scratch.log").write_text("not compared")
"""


def test_files_left_in_the_working_directory_are_compared(tmp_path: Path) -> None:
    writer = cli(tmp_path, "writer", WRITER)
    cases = write_cases(
        tmp_path, [{"id": "writes", "argv": ["v1"], "compare": ["files:out/*.txt"]}]
    )
    _, cassette = record(tmp_path, writer, cases)
    expected = {"out/report.txt": hashlib.sha256(b"v1").hexdigest()}
    assert json.loads(cassette.read_text())["cases"]["writes"]["fields"] == {
        "files:out/*.txt": expected
    }
    patched = cli(tmp_path, "writer2", WRITER.replace("sys.argv[1]", '"v2"'))
    result = replay(tmp_path, cassette, writer, patched, cases)
    assert result.code == 1
    assert result.evidence["mismatches"][0]["patch"] == {
        "out/report.txt": hashlib.sha256(b"v2").hexdigest()
    }


ENVIRON = """
import json, os
names = ("HOME", "TZ", "NO_COLOR", "LC_ALL", "COLUMNS", "SECRET", "EXTRA")
print(json.dumps({k: os.environ.get(k) for k in names} | {"cwd": os.getcwd()}))
"""


def test_each_case_runs_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET", "from the outer shell")
    environ = cli(tmp_path, "environ", ENVIRON)
    case = {
        "id": "env",
        "argv": [],
        "env": {"EXTRA": 1},
        "env_remove": ["TZ"],
        "compare": ["stdout.json"],
    }
    cases = write_cases(tmp_path, [case])
    recorded, _ = record(tmp_path, environ, cases)
    seen = recorded.evidence["unstable"][0]["values"][0]  # HOME and cwd are fresh per run
    assert seen["SECRET"] is None
    assert seen["TZ"] is None
    assert seen["EXTRA"] == "1"
    assert seen["NO_COLOR"] == "1"
    assert seen["LC_ALL"] == "C.UTF-8"
    assert seen["COLUMNS"] == "80"
    assert seen["HOME"] != os.environ.get("HOME")
    assert seen["cwd"] != os.getcwd()


def test_parent_disagreeing_with_its_recording_is_drift(tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path, [{"id": "one", "argv": ["1"], "compare": ["stdout.json.pointer:/count"]}]
    )
    _, cassette = record(tmp_path, cli(tmp_path, "clock", CLOCK), cases)
    other = cli(tmp_path, "other", CLOCK.replace("int(sys.argv[1])", "2"))
    result = replay(tmp_path, cassette, other, other, cases)
    assert result.code == 2
    assert "environment drift" in result.report["summary"]
    assert result.report["summary"].endswith(
        "re-record it on this machine from the merge base: `nox -s record`"
    )


def taken_ahead(tmp: Path, command: Path, cases: Path, count: int) -> tuple[Path, bytes]:
    """The parent-now runs of `cases` by `command` as the judge takes them beside the patch's
    build (replay_cassettes.parent_now), with each run's count then set to `count`: the file,
    and its bytes as first written."""
    taken = parent_now(command, load_cases(cases), tmp, lambda: False)
    first = json.dumps(taken).encode()
    for held in taken["cases"].values():
        held["fields"]["stdout.json.pointer:/count"] = count
    path = tmp / f"parent-now-{count}.json"
    path.write_text(json.dumps(taken))
    return path, first


def test_parent_now_runs_taken_beside_the_build_are_the_drift_checks(tmp_path: Path) -> None:
    """A case the judge ran on the parent build ahead is compared as run, not run again; one
    taken of another command or of a case as it was is run here (issue 28)."""
    clock = cli(tmp_path, "clock", CLOCK)
    spec = {"id": "one", "argv": ["1"], "compare": ["stdout.json.pointer:/count"]}
    cases = write_cases(tmp_path, [spec])
    _, cassette = record(tmp_path, clock, cases)
    taken, _ = taken_ahead(tmp_path, clock, cases, 2)  # the parent build, drifted by then
    drifted = replay(tmp_path, cassette, clock, clock, cases, extra=("--parent-now", taken))
    assert drifted.code == 2
    assert "environment drift" in drifted.report["summary"]
    assert drifted.evidence["parent_now_taken_before"] == 1
    other = cli(tmp_path, "other", CLOCK)  # the same program at another path: not the parent
    elsewhere, _ = taken_ahead(tmp_path, other, cases, 2)
    clean = replay(tmp_path, cassette, clock, clock, cases, extra=("--parent-now", elsewhere))
    assert clean.code == 0
    assert clean.evidence["parent_now_taken_before"] == 0
    write_cases(tmp_path, [{**spec, "argv": ["1", "--again"]}])  # the case changed since
    _, cassette = record(tmp_path, clock, cases)
    again = replay(tmp_path, cassette, clock, clock, cases, extra=("--parent-now", taken))
    assert again.code == 0
    assert again.evidence["parent_now_taken_before"] == 0


def test_parent_now_runs_rewritten_after_the_judge_wrote_them_fail_closed(tmp_path: Path) -> None:
    clock = cli(tmp_path, "clock", CLOCK)
    cases = write_cases(
        tmp_path, [{"id": "one", "argv": ["1"], "compare": ["stdout.json.pointer:/count"]}]
    )
    _, cassette = record(tmp_path, clock, cases)
    taken, first = taken_ahead(tmp_path, clock, cases, 2)  # rewritten after the judge wrote it
    sha = hashlib.sha256(first).hexdigest()
    flags = ("--parent-now", taken, "--parent-now-sha256", sha)
    result = replay(tmp_path, cassette, clock, clock, cases, extra=flags)
    assert result.code == 2
    assert "parent-now runs changed since the judge wrote them" in result.report["summary"]
    taken.write_bytes(first)  # as written: used
    kept = replay(tmp_path, cassette, clock, clock, cases, extra=flags)
    assert kept.code == 0
    assert kept.evidence["parent_now_taken_before"] == 1


def test_changed_case_is_re_recorded_not_reused(tmp_path: Path) -> None:
    clock = cli(tmp_path, "clock", CLOCK)
    cases = write_cases(tmp_path, [{"id": "one", "argv": ["1"], "compare": ["exit_code"]}])
    _, cassette = record(tmp_path, clock, cases)
    args = ("--command", clock, "--base", "b" * 40, "--out", cassette, "--cases", cases, "--reuse")
    assert step("record_cassettes.py", tmp_path, *args).report["summary"].startswith("reused")
    write_cases(tmp_path, [{"id": "one", "argv": ["2"], "compare": ["exit_code"]}])
    stale = replay(tmp_path, cassette, clock, clock, cases)
    assert stale.code == 2
    assert "changed since it was recorded" in stale.report["summary"]
    assert step("record_cassettes.py", tmp_path, *args).report["summary"].startswith("recorded")


@pytest.mark.parametrize(
    ("cases", "message"),
    [
        ([{"id": "a", "argv": [], "compare": ["exit_code"], "stdn": "typo"}], "case 'a'"),
        ([{"id": "a", "argv": [], "compare": ["exit_code"]}] * 2, "case 'a': duplicate id"),
        (
            [{"id": "a", "argv": [], "compare": ["stdout.yaml"]}],
            "unknown compare spec 'stdout.yaml'",
        ),
        (
            [{"id": "a", "argv": [], "compare": ["stdout.json.pointer:/a~2b"]}],
            "is not an RFC 6901 pointer",
        ),
        (
            [{"id": "a", "argv": [], "compare": ["stdout.json.pointer:a"]}],
            "is not an RFC 6901 pointer",
        ),
        (
            [{"id": "a", "argv": [], "compare": ["exit_code"], "noise": [{"regex": "("}]}],
            "invalid regex",
        ),
        ([{"id": "a", "argv": "ls", "compare": ["exit_code"]}], "field 'argv'"),
    ],
)
def test_invalid_cases_fail_closed_with_the_case_id(
    tmp_path: Path, cases: list[dict[str, Any]], message: str
) -> None:
    result, _ = record(tmp_path, Path(sys.executable), write_cases(tmp_path, cases))
    assert result.code == 2
    assert "case 'a'" in result.report["summary"]
    assert message in result.report["summary"]
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


SPAN = "import time; start = time.time(); time.sleep(1.0); print(start, time.time())"


@pytest.mark.parametrize("cores", [1, 2])
def test_commands_share_the_cores_they_are_given(cores: int) -> None:
    """The judge runs steps in its own threads and gives their commands `jobs` slots: with one,
    two commands started at once run one after the other; with two, side by side."""
    _gate.runs.process.share_cores(cores)
    try:
        cmd = [sys.executable, "-c", SPAN]
        with ThreadPoolExecutor(max_workers=2) as pool:
            jobs = [pool.submit(_gate.runs.process.run_group, cmd, timeout=60) for _ in range(2)]
        runs = [job.result() for job in jobs]
    finally:
        _gate.runs.process.share_cores(os.cpu_count() or 1)
    (start_a, end_a), (start_b, end_b) = sorted(
        tuple(map(float, run.stdout.head.split())) for run in runs
    )
    assert (end_a <= start_b) is (cores == 1), (start_a, end_a, start_b, end_b)


LEAVES_TRACES = """#!/bin/sh
# What a run finds, then traces for the next run in the same folders to find.
printf '%s %s %s' "$(stat -c %a .)" "$(ls -A . | wc -l)" "$(ls -A "$HOME" | wc -l)"
case "$1" in
  file) touch left-behind "$HOME/.cache-file" ;;
  mode) chmod 755 . ;;
esac
"""


def test_every_run_starts_in_empty_folders_whatever_the_run_before_left(tmp_path: Path) -> None:
    from _gate.runs.case_runs import run_many
    from _gate.runs.cases import parse_case

    cli = tmp_path / "bin" / "cli"
    cli.parent.mkdir()
    cli.write_text(LEAVES_TRACES)
    cli.chmod(0o755)
    cases = [
        parse_case({"id": f"c{i}", "argv": [kind], "compare": ["stdout.raw"]}, i, cli, 10.0)
        for i, kind in enumerate(["file", "mode", "none"] * 4)
    ]
    runs = run_many([(cli, case) for case in cases], tmp_path, "test")
    # Every run: a working directory of mode 700, it and HOME empty (0 and 0 entries).
    assert [run.stdout.head.decode() for run in runs] == ["700 0 0"] * len(cases)
