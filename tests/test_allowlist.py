"""An allowlist row amends one recording: it applies only while the judged base is its `base`.

Replay runs on real small CLIs, the assert inventory on a real git repository, the `allow`
command (and its nox session) on a clone of the bake; on a clone's real builds, record, replay
and the inventory (as the judge runs and records them) show a row left on the base branch
reported for clean-up instead of failing an unrelated patch closed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _gate.core.allowlist
import allow
import count_asserts
import pytest
import record_cassettes
import replay_cassettes
import yaml
from _gate.core.config import load_config
from _gate.core.protocol import FailClosed
from _gate.runs.envs import bin_dir
from _gate.runs.git import default_base

from tests.helpers import builder, decided, inventory_step, run_step, sha
from tools.bakery import branch, edit, git

BASE = "3f2c9a1d" + "0" * 32
MOVED = "9e8d7c6b" + "1" * 32
CLI = """\
import json
import sys

print(json.dumps({"error": {"code": "CART_EMPTY", "message": "cart has no items"}}))
sys.exit(1)
"""


def run(tmp: Path, main: Callable[[list[str]], int], *argv: str | Path) -> tuple[int, Any]:
    report = tmp / "report.json"
    code = main([*map(str, argv), "--report", str(report)])
    return code, json.loads(report.read_text())


def cli(tmp: Path, name: str, body: str) -> Path:
    path = tmp / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def row(base: object, field: str = "stdout.json", case: str = "empty-cart") -> dict[str, Any]:
    return {"id": case, "field": field, "base": base, "reason": "copy", "reviewer": "@alice"}


# --- replay ------------------------------------------------------------------------------------


@pytest.fixture
def cassette(tmp_path: Path) -> dict[str, Path]:
    """The parent recorded at BASE, and a patch that changes the message."""
    parent = cli(tmp_path, "parent", CLI)
    patch = cli(tmp_path, "patch", CLI.replace("cart has no items", "cart is empty"))
    cases = tmp_path / "cases.yaml"
    compare = ["exit_code", "stdout.json"]
    cases.write_text(
        yaml.safe_dump({"cases": [{"id": "empty-cart", "argv": [], "compare": compare}]})
    )
    out = tmp_path / "cassette.json"
    argv = ("--command", parent, "--base", BASE, "--out", out, "--cases", cases)
    assert run(tmp_path, record_cassettes.main, *argv, "--fixtures", tmp_path)[0] == 0
    return {"parent": parent, "patch": patch, "cases": cases, "cassette": out}


def replay(
    tmp: Path, paths: dict[str, Path], patch: str, rows: list[dict[str, Any]], *extra: str
) -> tuple[int, dict[str, Any]]:
    allowlist = tmp / "allowlist.yaml"
    allowlist.write_text(yaml.safe_dump({"allow": rows}))
    argv = ("--cassette", paths["cassette"], "--cases", paths["cases"], "--fixtures", tmp)
    commands = ("--parent-command", paths["parent"], "--patch-command", paths[patch])
    return run(tmp, replay_cassettes.main, *argv, *commands, "--allowlist", allowlist, *extra)


@pytest.mark.parametrize("base", [BASE, BASE[:7], BASE[:12].upper()], ids=["full", "7", "upper"])
def test_row_for_the_judged_base_allows(
    tmp_path: Path, cassette: dict[str, Path], base: str
) -> None:
    code, report = replay(tmp_path, cassette, "patch", [row(base)], "--base", BASE)
    assert code == 0, report["summary"]
    assert [a["field"] for a in report["evidence"]["allowed"]] == ["stdout.json"]
    assert report["evidence"]["other_base_rows"] == []


def test_row_of_a_moved_base_is_reported_and_not_applied(
    tmp_path: Path, cassette: dict[str, Path]
) -> None:
    code, report = replay(tmp_path, cassette, "patch", [row(MOVED)], "--base", BASE)
    assert code == 1  # the change is not allowed at this base
    assert report["evidence"]["allowed"] == []
    assert report["evidence"]["other_base_rows"] == [row(MOVED)]
    assert "1 allowlist row names another base and was not applied" in report["summary"]
    assert f"empty-cart stdout.json at {MOVED[:12]}): remove them" in report["summary"]


def test_row_of_a_moved_base_does_not_fail_an_unrelated_patch_closed(
    tmp_path: Path, cassette: dict[str, Path]
) -> None:
    """The base moved (the patch it amended merged): an unchanged surface still merges."""
    code, report = replay(tmp_path, cassette, "parent", [row(MOVED[:7])])
    assert code == 0, report["summary"]
    assert report["evidence"]["stale_allow_rows"] == []
    assert report["evidence"]["other_base_rows"][0]["base"] == MOVED[:7]
    assert "remove them" in report["summary"]


def test_row_for_the_judged_base_matching_nothing_is_stale(
    tmp_path: Path, cassette: dict[str, Path]
) -> None:
    code, report = replay(tmp_path, cassette, "parent", [row(BASE), row(MOVED)])
    assert code == 2
    assert (
        "row empty-cart stdout.json for this base matches no mismatch (stale)"
        in (report["summary"])
    )


def test_row_without_base_fails_closed(tmp_path: Path, cassette: dict[str, Path]) -> None:
    rows = [{k: v for k, v in row(BASE).items() if k != "base"}]
    code, report = replay(tmp_path, cassette, "patch", rows)
    assert code == 2
    assert report["summary"].startswith(
        f"{tmp_path / 'allowlist.yaml'}: allow row #1: field 'base' is missing; add `base:"
    )
    assert "nox -s allow" in report["summary"]


@pytest.mark.parametrize("base", [1234567, "abc12", "main", "3f2c9a1d-x"])
def test_base_that_is_not_a_sha_fails_closed(
    tmp_path: Path, cassette: dict[str, Path], base: object
) -> None:
    code, report = replay(tmp_path, cassette, "patch", [row(base)])
    assert code == 2
    assert "field 'base' must be a quoted commit sha of at least 7 hex digits" in report["summary"]


def test_judged_base_other_than_the_cassettes_fails_closed(
    tmp_path: Path, cassette: dict[str, Path]
) -> None:
    code, report = replay(tmp_path, cassette, "patch", [row(MOVED)], "--base", MOVED)
    assert code == 2
    assert "re-record" in report["summary"]


# --- assert inventory --------------------------------------------------------------------------

TWO = "def test_a() -> None:\n    assert 1 + 1 == 2\n    assert 2 * 2 == 4\n"


@pytest.fixture
def suite(tmp_path: Path) -> dict[str, Path | str]:
    """A repository whose head drops one assertion: fewer-asserts and total-drop."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "tests/test_a.py").write_text(TWO)
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "tests/test_a.py").write_text(TWO.replace("    assert 2 * 2 == 4\n", ""))
    git(repo, "commit", "-q", "-am", "patch")
    parent = tmp_path / "parent"
    git(repo, "worktree", "add", "-q", "--detach", str(parent), base)
    return {"repo": repo, "parent": parent, "base": base}


INVENTORY_ROWS = [("tests/test_a.py::test_a", "fewer-asserts"), (".", "total-drop")]


def inventory(
    tmp: Path, suite: dict[str, Path | str], rows: list[dict[str, Any]], *refs: str
) -> tuple[int, dict[str, Any]]:
    allowlist = tmp / "allowlist.yaml"
    allowlist.write_text(yaml.safe_dump({"allow": rows}))
    argv = ("--parent", suite["parent"], "--patch", suite["repo"], "--repo", suite["repo"])
    return run(tmp, count_asserts.main, *argv, *refs, "--allowlist", allowlist)


def inventory_rows(base: str) -> list[dict[str, Any]]:
    return [row(base, f"inventory:{rule}", test) for test, rule in INVENTORY_ROWS]


def test_inventory_row_for_the_judged_base_allows(
    tmp_path: Path, suite: dict[str, Path | str]
) -> None:
    base = str(suite["base"])
    refs = ("--base", "main~1", "--head", "main")
    code, report = inventory(tmp_path, suite, inventory_rows(base[:7]), *refs)
    assert code == 0, report["summary"]
    assert [f["rule"] for f in report["evidence"]["allowed"]] == ["fewer-asserts", "total-drop"]


def test_inventory_row_of_a_moved_base_is_reported_not_applied(
    tmp_path: Path, suite: dict[str, Path | str]
) -> None:
    refs = ("--base", str(suite["base"]), "--head", "main")
    code, report = inventory(tmp_path, suite, inventory_rows(MOVED), *refs)
    assert code == 1
    assert report["evidence"]["allowed"] == []
    assert len(report["evidence"]["other_base_rows"]) == 2
    assert "2 allowlist rows name another base" in report["summary"]
    same = ("--base", str(suite["base"]), "--head", str(suite["base"]))
    suite = {**suite, "repo": suite["parent"]}  # a patch with no findings at all
    code, report = inventory(tmp_path, suite, inventory_rows(MOVED), *same)
    assert code == 0, report["summary"]
    assert "remove them" in report["summary"]


def test_inventory_row_for_the_judged_base_matching_nothing_is_stale(
    tmp_path: Path, suite: dict[str, Path | str]
) -> None:
    rows = [*inventory_rows(str(suite["base"])), row(suite["base"], "inventory:skip-added")]
    refs = ("--base", str(suite["base"]), "--head", "main")
    code, report = inventory(tmp_path, suite, rows, *refs)
    assert code == 2
    assert "inventory:skip-added for this base matches no finding (stale)" in (report["summary"])


def test_inventory_rows_without_a_judged_base_fail_closed(
    tmp_path: Path, suite: dict[str, Path | str]
) -> None:
    code, report = inventory(tmp_path, suite, inventory_rows(str(suite["base"])))
    assert code == 2
    assert "pass --base" in report["summary"]


# --- the allow command -------------------------------------------------------------------------


@pytest.fixture
def clone(shop: Path, tmp_path: Path) -> dict[str, Any]:
    """A clone on a patch branch, its base branch moved on since: the merge base is neither."""
    repo = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(shop), str(repo)], check=True)
    fork = git(repo, "rev-parse", "HEAD")
    head = branch(repo, "agent", lambda r: (r / "NOTES.md").write_text("patch\n"))
    (repo / "BASE.md").write_text("base moved\n")
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "-m", "base moves on")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-q", head)
    return {"repo": repo, "fork": fork, "allowlist": repo / "oracle/allowlist.yaml"}


def add(tmp: Path, clone: dict[str, Any], *argv: str) -> tuple[int, dict[str, Any]]:
    return run(tmp, allow.main, "--repo", clone["repo"], *argv)


REASON = 'copy change; the code stays "CART_EMPTY"'
ROW_ARGS = ("--id", "empty-cart-rejects", "--reason", REASON, "--reviewer", "@alice")


def test_allow_writes_a_row_for_the_merge_base(tmp_path: Path, clone: dict[str, Any]) -> None:
    header = clone["allowlist"].read_text().split("allow: []")[0]
    code, report = add(tmp_path, clone, *ROW_ARGS, "--field", "stdout.json")
    assert code == 0, report["summary"]
    fork = clone["fork"]
    assert fork != git(clone["repo"], "rev-parse", "origin/main")
    expected = _gate.core.allowlist.Row("empty-cart-rejects", "stdout.json", fork, REASON, "@alice")
    assert _gate.core.allowlist.load_allowlist(clone["allowlist"]) == [expected]
    text = clone["allowlist"].read_text()
    assert text.startswith(header)
    assert f'    base: "{fork}"\n' in text
    assert report["evidence"] == expected.as_dict()
    assert report["schema_version"] == 2
    code, report = add(tmp_path, clone, *ROW_ARGS, "--field", "stdout.json")
    assert code == 2
    assert "already allows empty-cart-rejects stdout.json" in report["summary"]
    code, _ = add(tmp_path, clone, *ROW_ARGS, "--field", "stderr.sha256", "--base", "HEAD")
    assert code == 0
    rows = _gate.core.allowlist.load_allowlist(clone["allowlist"])
    head = git(clone["repo"], "rev-parse", "HEAD")
    assert [(r.field, r.base) for r in rows] == [("stdout.json", fork), ("stderr.sha256", head)]


def test_allow_row_applies_in_replay_at_its_base_only(
    tmp_path: Path, clone: dict[str, Any]
) -> None:
    assert add(tmp_path, clone, *ROW_ARGS, "--field", "stdout.json")[0] == 0
    rows = _gate.core.allowlist.load_allowlist(clone["allowlist"])
    assert _gate.core.allowlist.split_by_base(rows, clone["fork"]) == (rows, [])
    moved = git(clone["repo"], "rev-parse", "origin/main")
    assert _gate.core.allowlist.split_by_base(rows, moved) == ([], rows)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--id", "no-such-case", "--field", "exit_code"), "no such case"),
        (("--id", "empty-cart-rejects", "--field", "stdout.raw"), "compares only exit_code"),
        (("--id", "empty-cart-rejects", "--field", "exit_code", "--reason", " "), "--reason"),
        (("--id", "x", "--field", "inventory:"), "name the rule"),
        (("--id", "tests/test_cli.py", "--field", "crossrun"), "names a test id"),
    ],
)
def test_allow_refuses_a_row_that_cannot_apply(
    tmp_path: Path, clone: dict[str, Any], argv: tuple[str, ...], message: str
) -> None:
    before = clone["allowlist"].read_text()
    code, report = add(tmp_path, clone, "--reason", "r", "--reviewer", "@a", *argv)
    assert code == 2
    assert message in report["summary"]
    assert clone["allowlist"].read_text() == before


def test_row_that_would_not_read_back_leaves_the_file_alone(
    tmp_path: Path, clone: dict[str, Any]
) -> None:
    """YAML folds a NEL (U+0085) inside a quoted scalar: the check catches it before writing."""
    before = clone["allowlist"].read_text()
    argv = ("--id", "empty-cart-rejects", "--field", "exit_code", "--reviewer", "@a")
    code, report = add(tmp_path, clone, *argv, "--reason", "line\x85break")
    assert code == 2
    assert "would not read back as written" in report["summary"]
    assert clone["allowlist"].read_text() == before
    assert not clone["allowlist"].with_name("allowlist.yaml.tmp").exists()


def test_allow_takes_an_inventory_row(tmp_path: Path, clone: dict[str, Any]) -> None:
    argv = ("--id", "tests/test_cli.py::test_help", "--field", "inventory:fewer-asserts")
    code, report = add(tmp_path, clone, *argv, "--reason", "moved", "--reviewer", "@a")
    assert code == 0, report["summary"]
    assert (
        _gate.core.allowlist.load_allowlist(clone["allowlist"])[0].field
        == "inventory:fewer-asserts"
    )


def test_allow_takes_a_crossrun_row_that_replay_leaves_alone(
    tmp_path: Path, clone: dict[str, Any]
) -> None:
    argv = ("--id", "tests/test_cli.py::test_help", "--field", "crossrun")
    code, report = add(tmp_path, clone, *argv, "--reason", "new help text", "--reviewer", "@a")
    assert code == 0, report["summary"]
    rows = _gate.core.allowlist.load_allowlist(clone["allowlist"])
    assert [(r.id, r.field) for r in rows] == [("tests/test_cli.py::test_help", "crossrun")]
    assert not _gate.core.allowlist.is_cassette_row(rows[0])


@pytest.mark.parametrize(
    "text",
    [
        "# comments only\n",
        "allow: []  # none yet\n",
        "allow:\n- id: a\n  field: exit_code\n  base: 'abcdef1'\n  reason: r\n  reviewer: '@a'\n",
        "allow:\n    - {id: a, field: exit_code, base: 'abcdef1', reason: r, reviewer: '@a'}\n",
    ],
    ids=["comments-only", "empty-flow", "unindented-rows", "indented-flow-rows"],
)
def test_appended_row_reads_back_with_a_digit_only_sha(tmp_path: Path, text: str) -> None:
    path = tmp_path / "allowlist.yaml"
    path.write_text(text)
    before = _gate.core.allowlist.load_allowlist(path)
    new = _gate.core.allowlist.Row("c", "stdout.json", "1234567", 'why: "it\'s" fine', "@b")
    path.write_text(allow.with_row(text, new, path))
    assert _gate.core.allowlist.load_allowlist(path) == [*before, new]


def test_flow_style_allowlist_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "allowlist.yaml"
    with pytest.raises(FailClosed, match="add it by hand"):
        allow.with_row(
            "allow: [{id: a}]\n", _gate.core.allowlist.Row("c", "f", "abcdef1", "r", "@b"), path
        )


def test_nox_session_allow_writes_the_row(clone: dict[str, Any]) -> None:
    argv = [*ROW_ARGS, "--field", "exit_code"]
    proc = subprocess.run(
        ["nox", "-s", "allow", "--", *argv],
        cwd=clone["repo"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _gate.core.allowlist.load_allowlist(clone["allowlist"])
    assert [(r.id, r.field, r.base) for r in rows] == [
        ("empty-cart-rejects", "exit_code", clone["fork"])
    ]


# --- the steps that read the rows, as the judge runs them -------------------------------------


def test_rows_left_on_the_base_are_reported_not_fatal(
    shop: Path, wheelhouse: Path, tmp_path: Path
) -> None:
    """Rows merged with the patch they amended: the next patch's base is newer, so they are
    clean-up notes, in replay and in the inventory, and the unrelated patch merges."""
    repo = tmp_path / "gate"
    subprocess.run(["git", "clone", "-q", str(shop), str(repo)], check=True)
    old = git(repo, "rev-parse", "HEAD")
    rows = [row(old, "stdout.json", "empty-cart-rejects")]
    rows.append(row(old, "inventory:fewer-asserts", "tests/test_cli.py::test_x"))
    edit(repo / "oracle/allowlist.yaml", "allow: []", yaml.safe_dump({"allow": rows}).strip())
    git(repo, "commit", "-q", "--no-verify", "-am", "merged: a reviewed contract change")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    head = branch(repo, "unrelated", lambda r: (r / "NOTES.md").write_text("notes\n"))
    # The judge's default base (the merge base with origin/main), its worktree and builds.
    base = default_base(repo, sha(repo, head), "main")
    envs = builder(repo, tmp_path / "envs", wheelhouse)
    parent, patch = envs(base, "parent"), envs(head, "patch")
    tree = parent["tree"]
    config = load_config(tree / "oracle/judge.yaml")
    parent_cmd, patch_cmd = (
        bin_dir(b["python"].parent.parent) / config.command for b in (parent, patch)
    )
    reports = tmp_path / "reports"
    cases: tuple[str | Path, ...] = ("--cases", tree / "oracle/cases.yaml")
    cases += ("--fixtures", tree / "fixtures", "--timeout", str(config.case_timeout))
    cassette = tmp_path / "cassettes.json"
    record = ("--command", parent_cmd, "--base", base, "--out", cassette, "--reuse", *cases)
    commands = ("--parent-command", parent_cmd, "--patch-command", patch_cmd)
    replay = ("--cassette", cassette, *commands, "--allowlist", tree / "oracle/allowlist.yaml")
    recorded = run_step(reports, "record", record_cassettes.main, *record)
    replayed = run_step(reports, "replay", replay_cassettes.main, *replay, "--base", base, *cases)
    inventory = inventory_step(repo, envs, head, tmp_path, base=base)
    assert decided([recorded, replayed, inventory]) == "merge", inventory["summary"]
    for step, kept in ((replayed, rows[:1]), (inventory, rows[1:])):
        assert step["evidence"]["other_base_rows"] == kept
        assert "names another base and was not applied" in step["summary"]
