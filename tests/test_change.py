"""The capability diff (the `change` step): what the patch's changed package code newly reaches
for, read from source. Code that behaves only in the gate's world must first read that world:
each spelling below (sandbox and clock detection, a date window, stdin and terminal width,
stdout to a file) is a capability a function gains, named with its line; network, processes,
ioctls, dynamic and native code new to a module wait for a code owner's review."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import change
import pytest
from _gate.change import capabilities
from _gate.change.capabilities import added, reaches
from _gate.core.config import load_config
from _gate.core.protocol import FailClosed

from tests.helpers import SCRIPTS, edits, reported, worktree
from tools.bakery import branch, git, judge

# Each spelling, and the capability it must be seen to reach (besides any other).
SPELLINGS: dict[str, tuple[str, str]] = {
    # The sandbox, told apart from a user's machine.
    "uid-map": (
        "import pathlib\nx = pathlib.Path('/proc/self/uid_map').read_text()",
        "introspection",
    ),
    "pid-1": ("x = open('/proc/1/cgroup').read()", "introspection"),
    "small-pid": ("import os\nx = os.getpid() < 50", "introspection"),
    "dockerenv": ("import os.path\nx = os.path.exists('/.dockerenv')", "introspection"),
    "var-tmp": ("import os\nx = os.access('/var/tmp/', os.W_OK)", "filesystem"),
    "no-route": ("import socket\nx = socket.create_connection(('1.1.1.1', 53))", "network"),
    "aliased": ("from os import getuid as who\nx = who() != 0", "introspection"),
    # The shifted clock, and clocks that are not shifted.
    "preload": ("import os\nx = 'LD_PRELOAD' in os.environ", "introspection"),
    "faketime": ("x = open('/proc/self/maps').read().count('faketime')", "introspection"),
    "file-time": ("import os\nx = os.stat(__file__).st_mtime", "clock"),
    "uptime": ("x = open('/proc/uptime').read()", "clock"),
    "boot-clock": ("import time\nx = time.clock_gettime(time.CLOCK_BOOTTIME)", "clock"),
    "monotonic": ("from time import monotonic as m\nx = m()", "clock"),
    # One date is one point in time.
    "week-53": ("import datetime as dt\nx = dt.date.today().isocalendar()[1] == 53", "clock"),
    "now": ("from datetime import datetime\nx = datetime.now().year", "clock"),
    # Streams and terminals.
    "stdin-tty": ("import sys\nx = sys.stdin.isatty()", "terminal"),
    "fd-0": ("import os\nx = os.isatty(0)", "terminal"),
    "width": ("import shutil\nx = shutil.get_terminal_size().columns != 80", "terminal"),
    "winsize": ("import fcntl, termios\nx = fcntl.ioctl(1, termios.TIOCGWINSZ, b'')", "ioctl"),
    "stdout-file": ("import os, stat\nx = stat.S_ISREG(os.fstat(1).st_mode)", "terminal"),
    "stream-of": ("def f(stream):\n    return stream.isatty()", "terminal"),
    # Reaching the environment by other names.
    "getattr-env": ("import os\nx = getattr(os, 'environ')['HOME']", "env"),
    "import-env": ("x = __import__('os').environ", "env"),
    "getenv": ("from os import getenv\nx = getenv('CI')", "env"),
    # Processes, dynamic and native code.
    "subprocess": ("import subprocess as sp\nx = sp.run(['true'])", "process"),
    "system": ("import os\nx = getattr(os, 'system')('true')", "process"),
    "module-of": (
        "import importlib\nm = importlib.import_module('subprocess')\nx = m.Popen",
        "process",
    ),
    "named-import": ("x = __import__(name)", "dynamic"),
    "getattr-any": ("import os\nx = getattr(os, name)", "dynamic"),
    "eval-alias": ("e = eval\nx = e('1')", "dynamic"),
    "exec": ("exec('x = 1')", "dynamic"),
    "module-dict": ("import os\nx = os.__dict__['environ']", "dynamic"),
    "vars-module": ("import os\nx = vars(os)['system']", "dynamic"),
    "ctypes": ("from ctypes import CDLL\nx = CDLL(None)", "native"),
    # The gate's tracer, told or reached.
    "gettrace": ("import sys\nx = sys.gettrace() is None", "dynamic"),
    "thread-trace": ("from threading import gettrace\nx = gettrace()", "dynamic"),
    "frame-trace": ("import sys\nx = sys._getframe().f_trace", "dynamic"),
    "gc-reach": ("import gc\nx = [o for o in gc.get_objects() if hasattr(o, 'token')]", "dynamic"),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_each_spelling_reaches_its_capability_in_its_function(spelling: str) -> None:
    code, capability = SPELLINGS[spelling]
    body = textwrap.indent(code, "    ")
    source = f"def judged(name=None):\n{body}\n    return x\n" if "def " not in code else code
    found = {r.function: r.capabilities for r in reaches(source, "pkg.mod", "src/pkg/mod.py")}
    function = "f" if "def " in code else "judged"
    assert capability in found.get(function, {}), found


HONEST = '''
"""Reads LD_PRELOAD? No: this docstring names /etc/hosts and /proc/self only in words."""
import json
import re
import time

ROUTE = "/home"


def render(rows, vars=None):
    vars = vars or {}
    pattern = re.compile(r"\\d+")
    time.sleep(0)
    return json.dumps([pattern.sub("#", row) for row in rows]) + str(vars)


class Row:
    def fields(self):
        return vars(self), self.__dict__, type(self).__dict__
'''


def test_honest_code_reaches_nothing() -> None:
    """Pure code, a docstring naming folders, a route, a variable named `vars`, a sleep, an
    object's own namespace."""
    assert reaches(HONEST, "pkg.view", "src/pkg/view.py") == []


def test_a_function_gains_only_what_its_base_version_did_not_reach() -> None:
    base = "import os\ndef f():\n    return os.environ['A']\ndef g():\n    return 1\n"
    patch = (
        "import os, time\ndef f():\n    return os.environ['B']\n"
        "def g():\n    return time.time()\n"
        "class K:\n    def h(self):\n        return os.getenv('C')\n"
    )
    gains = added(reaches(base, "m", "m.py"), reaches(patch, "m", "m.py"))
    assert [(g.function, g.capability, g.line, g.new_to_module) for g in gains] == [
        ("g", "clock", 5, True),
        ("K.h", "env", 8, False),
    ]


def test_a_module_the_base_lacked_is_compared_with_the_whole_package() -> None:
    """A module moved or split keeps what the package already reached; a new module reaching
    what no module of the base did gains it as new."""
    source = "import subprocess\ndef run():\n    return subprocess.run(['x'])\n"
    moved = reaches(source, "pkg.commands.cli", "src/pkg/commands/cli.py")
    assert [g.new_to_module for g in added([], moved, {"process", "env"})] == [False]
    assert [g.new_to_module for g in added([], moved, {"env"})] == [True]


def test_every_function_and_class_body_is_a_scope_wherever_it_stands() -> None:
    source = (
        "import os\ntry:\n    import fcntl\nexcept ImportError:\n"
        "    def probe():\n        return os.getuid()\n"
        "for _ in ():\n    def again():\n        return os.getpid()\n"
        "class Settings:\n    home = os.environ['HOME']\n"
    )
    found = {r.function: set(r.capabilities) for r in reaches(source, "m", "m.py")}
    assert found == {
        "probe": {"introspection"},
        "again": {"introspection"},
        "Settings": {"env"},
    }


def test_a_nested_function_is_its_own_scope() -> None:
    source = (
        "import os\ndef outer():\n    def inner():\n        return os.getpid()\n    return inner\n"
    )
    found = {r.function: set(r.capabilities) for r in reaches(source, "m", "m.py")}
    assert found == {"outer.inner": {"introspection"}}


def test_the_docs_table_lists_every_rule_under_its_capability() -> None:
    """docs/capabilities.md's table is the rules' own list: each name, attribute, prefix and
    word in the row of the capability it counts as."""
    doc = (SCRIPTS.parent / "docs/capabilities.md").read_text("utf-8")
    rows = {
        line.split("|")[1].strip(" `"): line for line in doc.splitlines() if line.startswith("| `")
    }
    tables = (
        capabilities.NAMES,
        capabilities.ATTRIBUTES,
        capabilities.PREFIXES,
        capabilities.WORDS,
    )
    missing = [
        f"{name} ({capability})"
        for table in tables
        for name, capability in table.items()
        if f"`{name}`" not in rows.get(capability, "") and f"`.{name}`" not in rows[capability]
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("[process]", "must be a mapping"),
        ("{shop.cli: process}", "expected a list"),
        ("{shop.cli: [procesess]}", "unknown capability 'procesess'"),
        ("{'shop cli': [process]}", "is no module name"),
    ],
)
def test_a_wrong_capabilities_row_fails_closed_naming_the_field(
    tmp_path: Path, value: str, why: str
) -> None:
    config = tmp_path / "judge.yaml"
    config.write_text(
        f"command: shop\nbase_branch: main\noracle_ref: o\nprotected: []\ncapabilities: {value}\n"
    )
    with pytest.raises(FailClosed, match=rf"judge\.yaml: field 'capabilities'.*{why}"):
        load_config(config)


# --- the step on a real bake's trees ---------------------------------------------------------

D = "src/shop/discounts.py"
ANCHOR = "    remaining = subtotal_cents\n"


def judged_change(
    repo: Path, head: str, tmp: Path, *extra: str, base: str = "main"
) -> tuple[int, dict[str, object]]:
    parent = worktree(repo, base, tmp / "parent")
    patch = worktree(repo, head, tmp / "patch")
    flags = ("--parent-tree", parent, "--patch-tree", patch, "--package", "src/shop")
    return reported(change.main, tmp / "change.json", *flags, *extra)


def test_an_honest_change_gains_nothing(shop: Path, tmp_path: Path) -> None:
    head = branch(shop, "change/honest", edits((D, ANCHOR, ANCHOR + "    remaining += 0\n")))
    code, report = judged_change(shop, head, tmp_path)
    assert code == 0, report["summary"]
    assert report["evidence"]["capabilities"] == []  # type: ignore[index]
    assert "1 package file(s) changed; no function reaches anything" in str(report["summary"])


def test_a_clock_read_is_listed_and_never_a_verdict_by_itself(shop: Path, tmp_path: Path) -> None:
    clock = ANCHOR + "    import time\n    if time.localtime().tm_wday == 5:\n        return 0\n"
    head = branch(shop, "change/clock", edits((D, ANCHOR, clock)))
    code, report = judged_change(shop, head, tmp_path)
    assert code == 0, report["summary"]
    rows = report["evidence"]["capabilities"]  # type: ignore[index]
    assert [(r["capability"], r["function"], r["path"]) for r in rows] == [
        ("clock", "stack_discounts", D)
    ]
    assert f"clock at {D}:" in str(report["summary"])


PROCESS = ANCHOR + "    import subprocess\n    subprocess.run(['true'], check=False)\n"


def test_a_new_process_waits_for_a_code_owner(shop: Path, tmp_path: Path) -> None:
    head = branch(shop, "change/process", edits((D, ANCHOR, PROCESS)))
    code, report = judged_change(shop, head, tmp_path)
    assert (code, report["status"]) == (2, "needs-review"), report["summary"]
    assert f"process at {D}:" in str(report["summary"])
    assert "`shop.discounts: [process]` under judge.yaml `capabilities:`" in str(report["summary"])
    code, report = judged_change(shop, head, tmp_path / "reviewed", "--reviewed")
    assert code == 0, report["summary"]
    assert "accepted under ORACLE_REVIEW=1" in str(report["summary"])


def test_a_reviewed_capabilities_row_of_the_base_lets_it_merge(shop: Path, tmp_path: Path) -> None:
    row = ("oracle/judge.yaml", "capabilities: {}", "capabilities:\n  shop: [process]")
    base = branch(shop, "change/reviewed-base", edits(row))
    head = branch(shop, "change/process-reviewed", edits((D, ANCHOR, PROCESS)), base=base)
    config = tmp_path / "parent/oracle/judge.yaml"  # the base's, as the judge reads it
    code, report = judged_change(shop, head, tmp_path, "--config", str(config), base=base)
    assert code == 0, report["summary"]
    assert not any(row["review"] for row in report["evidence"]["capabilities"])  # type: ignore[index]


def test_a_changed_file_python_cannot_read_fails_closed_naming_it(
    shop: Path, tmp_path: Path
) -> None:
    head = branch(shop, "change/broken", edits((D, ANCHOR, ANCHOR + "    return (\n")))
    code, report = judged_change(shop, head, tmp_path)
    assert (code, report["status"]) == (2, "error"), report["summary"]
    assert str(report["summary"]).startswith(f"head:{D} line ")


FUTURE = "from __future__ import annotations\n"


@pytest.mark.parametrize(
    ("name", "hostile"),
    [("parser-memory", "-" * 100_000 + "1"), ("recursion", " + ".join(["a"] * 20_000))],
)
def test_the_step_reads_the_patchs_code_and_never_runs_it(
    shop: Path, tmp_path: Path, name: str, hostile: str
) -> None:
    """The capability diff parses the changed files in the judge's own process (no launcher:
    nothing of the patch runs there). Module-level code that would plant a file and start a
    process is read, never run, and listed; a source built to exhaust the parser fails the
    step closed naming the file, never with an internal error."""
    marker = tmp_path / "planted"
    plant = (
        f"import pathlib, subprocess\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        f"subprocess.run(['touch', {str(marker) + '.process'!r}], check=False)\n"
    )
    head = branch(shop, f"change/plant-{name}", edits((D, FUTURE, FUTURE + plant)))
    code, report = judged_change(shop, head, tmp_path / "plant")
    assert (code, report["status"]) == (2, "needs-review"), report["summary"]
    rows = report["evidence"]["capabilities"]  # type: ignore[index]
    found = {(r["capability"], r["function"]) for r in rows}
    assert found == {("process", "<module>"), ("filesystem", "<module>")}  # a /tmp/ path
    head = branch(shop, f"change/bomb-{name}", edits((D, FUTURE, f"{FUTURE}BOMB = {hostile}\n")))
    code, report = judged_change(shop, head, tmp_path / "bomb")
    assert (code, report["status"]) == (2, "error"), report["summary"]
    assert str(report["summary"]).startswith(f"head:{D} line "), report["summary"]
    assert "internal error" not in str(report["summary"])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("planted")) == []


DORMANT = ANCHOR + (
    "    if subtotal_cents < -1:  # never: checked above\n"
    "        import subprocess\n\n        subprocess.run(['true'], check=False)\n"
)


@pytest.mark.e2e
def test_the_judge_waits_for_a_review_of_a_dormant_process_and_shows_it(shop: Path) -> None:
    """A process no evidence runs: every other step passes; the change step names it, the
    summary lists it first, and judge.sarif holds it on its line."""
    head = branch(shop, "change-judge/process", edits((D, ANCHOR, DORMANT)))
    judged = judge(shop, "--base", "main", "--head", head)
    assert (judged.returncode, judged.report["verdict"]) == (2, "needs-review"), judged.output
    assert judged.statuses["change"] == "needs-review", judged.output
    others = {
        name for name, status in judged.statuses.items() if status not in ("pass", "advisory")
    }
    assert others == {"change"}, judged.output
    summary = (shop / "reports/judge-summary.md").read_text("utf-8")
    line = source_lines(shop, head).index("        subprocess.run(['true'], check=False)") + 1
    process = f"- `process` at `{D}:{line}` in `stack_discounts` (**a code owner reviews it**: "
    unseen = f"no case, property or test ran line(s) {line - 2}, {line} and a branch on line(s) "
    assert f"{process}{unseen}{line - 3} went one way only)" in summary, summary
    assert "### Needs review: capabilities new to their module" in summary
    # What the evidence saw: the dormant branch's two lines of code, and no other, ran in no
    # run (its `if` ran in every case).
    assert "### What the evidence saw (step `change`)" in summary
    assert f"`{D}`: 1 of 3 changed lines ran in a case" in summary, summary
    assert f"- line(s) {line - 2}, {line}: **no evidence ran them**" in summary, summary
    assert f"- line(s) {line - 3}: **a branch there went one way only**" in summary, summary
    assert f"a code owner reviews process at {D}:{line}, then: ORACLE_REVIEW=1" in judged.output
    sarif = json.loads((shop / "reports/judge.sarif").read_text("utf-8"))
    found = [
        (r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
        for r in sarif["runs"][0]["results"]
    ]
    assert ("change/process", "warning", line) in found
    assert ("change/unrun", "note", line) in found
    assert ("change/one-way", "note", line - 3) in found


def source_lines(repo: Path, ref: str) -> list[str]:
    return git(repo, "show", f"{ref}:{D}").splitlines()


# An honest read of the world in code every case runs, with no branch on it that a run could
# take one way only: a documented limit from the environment, a clock read for a timing.
TIMED = ANCHOR + (
    "    import os, time\n\n"
    "    started = time.monotonic()\n"
    "    coupons = list(coupons)[: int(os.environ.get('SHOP_MAX_COUPONS', '1000'))]\n"
)


@pytest.mark.e2e
def test_the_judge_merges_an_honest_read_of_the_environment_and_lists_it(shop: Path) -> None:
    """A documented variable and a clock read, in lines every case runs: listed, never a
    verdict by itself."""
    head = branch(shop, "change-judge/timing", edits((D, ANCHOR, TIMED)))
    judged = judge(shop, "--base", "main", "--head", head)
    assert (judged.returncode, judged.report["verdict"]) == (0, "merge"), judged.output
    summary = (shop / "reports/judge-summary.md").read_text("utf-8")
    listed = [line for line in summary.splitlines() if line.startswith("- `") and D in line]
    assert {line.split("`")[1] for line in listed} == {"env", "clock"}, summary
    assert "a code owner reviews it" not in summary
    assert f"`{D}`: 3 of 3 changed lines ran in a case, property or test of the base" in summary


# Code that behaves only in the gate's world, each a break a user's machine meets and no run
# of the gate does: a branch taken outside the sandbox's user namespace, in ISO week 53 only,
# when stdin is a terminal; the same told inside one line, by a conditional expression and by
# `and`. Each a function of its own, all in one patch (one judgment), which merged before
# change coverage; the last line of each is the one no run meets.
WORLDS = {
    "sandbox": (
        "    if '4294967295' in open('/proc/self/uid_map').read():  # the machine's own\n"
        "        remaining -= 1\n"
    ),
    "week_53": (
        "    import datetime\n\n"
        "    if datetime.date.today().isocalendar()[1] == 53:\n"
        "        remaining -= 1\n"
    ),
    "stdin_terminal": (
        "    import sys\n\n    if sys.stdin is not None and sys.stdin.isatty():\n"
        "        remaining -= 1\n"
    ),
    "sandbox_one_line": (
        "    remaining -= 1 if '4294967295' in open('/proc/self/uid_map').read() else 0\n"
    ),
    "terminal_one_line": (
        "    import sys\n\n    remaining -= int(sys.stdin.isatty() and remaining > 0)\n"
    ),
}
WORLD_CALLS = "".join(f"    remaining = _{name}(remaining)\n" for name in WORLDS)
WORLD_FUNCTIONS = "".join(
    f"\n\ndef _{name}(remaining: int) -> int:\n{body}    return remaining\n"
    for name, body in WORLDS.items()
)


def in_worlds(repo: Path) -> None:
    edits((D, ANCHOR, ANCHOR + WORLD_CALLS))(repo)
    with (repo / D).open("a", encoding="utf-8") as module:
        module.write(WORLD_FUNCTIONS)


@pytest.mark.e2e
def test_code_that_behaves_by_a_world_no_run_met_waits_for_review(shop: Path) -> None:
    head = branch(shop, "change-judge/worlds", in_worlds)
    judged = judge(shop, "--base", "main", "--head", head)
    assert (judged.returncode, judged.report["verdict"]) == (2, "needs-review"), judged.output
    others = {n for n, status in judged.statuses.items() if status not in ("pass", "advisory")}
    assert others == {"change"}, judged.output
    lines = source_lines(shop, head)
    rows = json.loads((shop / "reports/change.json").read_text("utf-8"))["evidence"]
    unseen = {row["function"]: row["unseen"] for row in rows["capabilities"] if row["review"]}
    for name in WORLDS:
        start = lines.index(f"def _{name}(remaining: int) -> int:") + 1
        line = start + WORLDS[name].count("\n")  # the world's last line
        said = (
            f"a branch on line(s) {line} went one way only"
            if "one_line" in name
            else (f"no case, property or test ran line(s) {line}")
        )
        assert said in unseen.get(f"_{name}", ""), (name, unseen)


# The patch's own test builds the world its code looks for: a stdin that says it is a terminal.
OWN_TEST = """
import io
import sys

from shop.discounts import stack_discounts


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_at_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stdin", Terminal())
    stack_discounts(1000, [])
"""


@pytest.mark.e2e
def test_a_line_only_the_patchs_own_tests_run_is_not_evidence(shop: Path) -> None:
    """The patch's test runs the branch its code takes only at a terminal, in a world the test
    built: shown as run by the patch's own tests, and still waiting for review."""
    change = edits((D, ANCHOR, ANCHOR + WORLDS["stdin_terminal"]))

    def with_test(repo: Path) -> None:
        change(repo)
        (repo / "tests/test_terminal.py").write_text(OWN_TEST, "utf-8")

    head = branch(shop, "change-judge/own-test", with_test)
    judged = judge(shop, "--base", "main", "--head", head)
    assert (judged.returncode, judged.report["verdict"]) == (2, "needs-review"), judged.output
    assert judged.statuses["change"] == "needs-review", judged.output
    line = source_lines(shop, head).index("        remaining -= 1") + 1
    summary = (shop / "reports/judge-summary.md").read_text("utf-8")
    assert f"- line(s) {line}: only the patch's own tests (not counted)" in summary, summary


@pytest.mark.e2e
def test_a_merge_of_shards_judges_change_coverage_with_every_shards_runs(
    shop: Path, tmp_path: Path
) -> None:
    """The change step runs on the lead shard and sees that shard's runs alone; the merge
    concludes it again with what every shard's runs saw."""
    head = branch(shop, "change-judge/sharded", edits((D, ANCHOR, ANCHOR + WORLDS["sandbox"])))
    folders = [tmp_path / f"shard-{i}" for i in (1, 2)]
    for index, folder in enumerate(folders, 1):
        shard = ["--head", head, "--shard", f"{index}/2", "--reports", str(folder)]
        one = subprocess.run(["nox", "-s", "judge", "--", *shard], cwd=shop, capture_output=True)
        assert one.returncode in (0, 2), one.stdout[-2000:]
    lead = json.loads((folders[0] / "change.json").read_text("utf-8"))["evidence"]
    merged = tmp_path / "merged"
    cmd = ["nox", "-s", "merge", "--", *map(str, folders), "--out", str(merged)]
    ran = subprocess.run(cmd, cwd=shop, capture_output=True, text=True)
    report = json.loads((merged / "judge-report.json").read_text("utf-8"))
    assert (ran.returncode, report["verdict"]) == (2, "needs-review"), ran.stdout
    change = json.loads((merged / "change.json").read_text("utf-8"))
    assert change["status"] == "needs-review", change["summary"]
    # Every shard's traced runs, not the lead's alone.
    assert change["evidence"]["coverage"]["runs"] > lead["coverage"]["runs"], change["evidence"]
    line = source_lines(shop, head).index("        remaining -= 1") + 1
    assert f"no case, property or test ran line(s) {line}" in change["summary"]


ERROR_BRANCH = ANCHOR + (
    "    if subtotal_cents > 10**15:\n"
    "        raise ValueError('subtotal_cents is beyond any order')\n"
)


@pytest.mark.e2e
def test_an_honest_untested_error_branch_merges_listed_as_unrun(shop: Path) -> None:
    """No capability gained: coverage is reported, never a verdict by itself."""
    head = branch(shop, "change-judge/error-branch", edits((D, ANCHOR, ERROR_BRANCH)))
    judged = judge(shop, "--base", "main", "--head", head)
    assert (judged.returncode, judged.report["verdict"]) == (0, "merge"), judged.output
    line = (
        source_lines(shop, head).index(
            "        raise ValueError('subtotal_cents is beyond any order')"
        )
        + 1
    )
    summary = (shop / "reports/judge-summary.md").read_text("utf-8")
    assert f"- line(s) {line}: **no evidence ran them**" in summary, summary
    assert f"- line(s) {line - 1}: **a branch there went one way only**" in summary, summary
