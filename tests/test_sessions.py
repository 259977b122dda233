"""The baked sessions beside the judge: record, lock, oracle, and the reviewed allowlist path.

record, lock and oracle run as nox sessions (record also by its `main(argv)`, on a clone whose
base branch is ahead of its origin's). The allowlist path runs step by step: on real branches of
the bake and real builds of them, write_set.py, record_cassettes.py and
replay_cassettes.py run as the judge runs them (`main(argv)`, with the arguments judge.py
passes). One whole judge (scripts/judge.py, without nox) shows what only the judge decides:
under ORACLE_REVIEW=1 it gives replay and the crossrun the patch's allowlist, and the reviewed
change merges.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import record_cassettes
import replay_cassettes
import write_set as write_set_step
import yaml
from _gate.steps import record

from tests.helpers import (
    BROKEN_RETURN,
    CAUGHT_BY,
    HONEST_RETURN,
    RULE,
    Built,
    built_cli,
    case_flags,
    reported,
)
from tools.bakery import branch, edit, git, judge_script

Report = tuple[int, dict[str, Any]]  # a step's exit code and its JSON report


def nox(repo: Path, session: str) -> None:
    proc = subprocess.run(
        ["nox", "-s", session], cwd=repo, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_record_writes_cassettes_with_provenance(shop: Path) -> None:
    nox(shop, "record")
    base = git(shop, "rev-parse", "main")
    cassette = json.loads((shop / f".oracle/cassettes/{base}/cassettes.json").read_text())
    case_ids = [
        case["id"] for case in yaml.safe_load((shop / "oracle/cases.yaml").read_text())["cases"]
    ]
    assert cassette["provenance"]["base"] == base
    assert sorted(cassette["provenance"]["cases"]) == sorted(case_ids)
    empty = cassette["cases"]["empty-cart-rejects"]
    assert empty["fields"]["exit_code"] == 1
    assert empty["fields"]["stdout.json"]["error"]["code"] == "CART_EMPTY"
    assert empty["unstable"] == {}


def test_record_names_the_judges_base_when_the_local_base_is_ahead(
    shop: Path, tmp_path: Path, wheelhouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    origin, clone = tmp_path / "origin.git", tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--bare", str(shop), str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    (clone / "NOTES.md").write_text("a local commit, not pushed\n")
    git(clone, "add", "NOTES.md")
    git(clone, "commit", "-qm", "ahead of origin")  # local main: one commit ahead
    pushed, local = git(clone, "rev-parse", "origin/main"), git(clone, "rev-parse", "main")
    assert pushed != local
    # --help states the one rule.
    shown = " ".join(record.STEP.parser().format_help().split())
    assert "the merge base of HEAD and origin/<base_branch>, or of HEAD and <base_branch>" in shown
    argv = ["--repo", str(clone), "--wheelhouse", str(wheelhouse)]
    code = record_cassettes.main([*argv, "--report", str(tmp_path / "record.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    said = [line for line in out.splitlines() if line.startswith("record: recording from")]
    assert len(said) == 1, out
    assert said[0].startswith(
        f"record: recording from {pushed[:12]}, the merge base of HEAD and origin/main; "
        "main is 1 commit ahead of origin/main"
    ), said
    assert "`--base main` records from main" in said[0]
    assert (clone / f".oracle/cassettes/{pushed}/cassettes.json").is_file()
    assert not (clone / f".oracle/cassettes/{local}").exists()


def session(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nox", *args], cwd=repo, capture_output=True, text=True, check=False)


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


@pytest.mark.e2e  # whole nox sessions, each on a build of the working tree
def test_the_oracle_session_runs_the_properties_on_the_working_tree(repo: Path) -> None:
    before = refs(repo)
    passed = session(repo, "-s", "oracle")
    output = passed.stdout + passed.stderr
    assert passed.returncode == 0, output
    assert re.search(r"^oracle: pass: \d+ property oracles and \d+ example oracles", output, re.M)
    edit(repo / RULE, HONEST_RETURN, BROKEN_RETURN)  # broken in the working tree, uncommitted
    broken = session(repo, "-s", "oracle", "--", "-k", "invert")  # pytest's -k passes through
    output = broken.stdout + broken.stderr
    assert broken.returncode == 1, output
    last = [line for line in output.splitlines() if line.startswith("oracle: block:")]
    assert last, output
    assert f"oracle/test_properties.py::{CAUGHT_BY} failed" in last[0], output
    assert "with the working tree's changes" in last[0]
    assert re.search(r"oracle: block: \d+ of [1-9] oracles fail", last[0]), last[0]  # -k picked
    # Nothing of the repository changed but the edit: no ref, no index entry, no worktree.
    assert refs(repo) == before
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert git(repo, "diff", "--name-only") == RULE
    assert git(repo, "ls-files", "--others", "--exclude-standard") == ""
    assert len(git(repo, "worktree", "list").splitlines()) == 1


def test_lock_rewrites_the_digests(shop: Path) -> None:
    notes = shop / "fixtures/carts.md"
    notes.write_text(notes.read_text() + "\none more line\n")
    try:
        nox(shop, "lock")
        lock = json.loads((shop / "fixtures.lock").read_text())
        assert lock["fixtures/carts.md"] == hashlib.sha256(notes.read_bytes()).hexdigest()
    finally:
        git(shop, "checkout", "--", "fixtures.lock", "fixtures/carts.md")


# The base's unit test that pins the empty-cart message: the crossrun runs it on the patch.
PINNING_TEST = "tests/test_cli.py::test_rejected_cart_prints_json_error_and_one_line"


def copy_change_with_rows(reviewer: str, *fields: str) -> Callable[[Path], None]:
    """Change the empty-cart message and allowlist `fields` of its case, and the base's test
    that pins the message, in the same patch."""

    def change(repo: Path) -> None:
        base = git(repo, "rev-parse", "HEAD")  # the branch point: the base the rows amend
        row = {"id": "empty-cart-rejects", "base": base, "reason": "copy change"}
        rows = [{**row, "field": f, "reviewer": reviewer} for f in fields]
        rows.append({**row, "id": PINNING_TEST, "field": "crossrun", "reviewer": reviewer})
        edit(repo / "src/shop/orders.py", '"cart has no items"', '"cart is empty"')
        (repo / "oracle/allowlist.yaml").write_text(yaml.safe_dump({"allow": rows}))

    return change


CHANGED = ("stdout.json", "stderr.sha256")  # the message shows on stdout and on stderr


@pytest.fixture(scope="module")
def cassette(shop: Path, envs: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The parent's cassette, recorded from the build of main as the judge records it."""
    parent = envs("main", "parent")
    tmp = tmp_path_factory.mktemp("cassette")
    out = tmp / "cassettes.json"
    base = git(shop, "rev-parse", "main")
    record = (
        "--command",
        built_cli(parent, parent["tree"]),
        "--base",
        base,
        "--out",
        out,
        "--reuse",
    )
    code, report = reported(
        record_cassettes.main, tmp / "record.json", *record, *case_flags(parent["tree"])
    )
    assert code == 0, report["summary"]
    return out


def replay(
    shop: Path, envs: Built, cassette: Path, head: str, tmp: Path, allowlist: Path
) -> Report:
    """replay_cassettes.py on the builds of main (the base) and `head`, with `allowlist`: the
    base's, or under ORACLE_REVIEW=1 the patch's, as the judge picks it."""
    parent, patch = envs("main", "parent"), envs(head, "patch")
    base = git(shop, "rev-parse", "main")
    commands: tuple[str | Path, ...] = ("--parent-command", built_cli(parent, parent["tree"]))
    commands += ("--patch-command", built_cli(patch, parent["tree"]))
    argv = ("--cassette", cassette, *commands, "--allowlist", allowlist, "--base", base)
    return reported(replay_cassettes.main, tmp / "replay.json", *argv, *case_flags(parent["tree"]))


def reviewed_replay(
    shop: Path,
    envs: Built,
    cassette: Path,
    head: str,
    tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Report:
    """Replay under ORACLE_REVIEW=1: the allowlist is the patch's own."""
    monkeypatch.setenv("ORACLE_REVIEW", "1")
    allowlist = envs(head, "patch")["tree"] / "oracle/allowlist.yaml"
    return replay(shop, envs, cassette, head, tmp, allowlist)


@pytest.mark.e2e  # the reviewed verdict comes from a whole judge (without nox)
def test_allowlisted_contract_change_merges_after_review(
    shop: Path, envs: Built, cassette: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = branch(shop, "reviewed-copy", copy_change_with_rows("@alice", *CHANGED))
    # Unreviewed: the patch edits the protected allowlist, so the write-set needs a code
    # owner's review (exit 2); and replay, given the base's allowlist, has no row for the change.
    monkeypatch.delenv("ORACLE_REVIEW", raising=False)
    base_tree = envs("main", "parent")["tree"]
    refs: tuple[str | Path, ...] = ("--repo", shop, "--base", git(shop, "rev-parse", "main"))
    refs += ("--head", git(shop, "rev-parse", head), "--config", base_tree / "oracle/judge.yaml")
    code, write_set = reported(write_set_step.main, tmp_path / "write-set.json", *refs)
    assert code == 2, write_set["summary"]
    assert write_set["status"] == "needs-review"
    assert [hit["path"] for hit in write_set["evidence"]["protected"]] == ["oracle/allowlist.yaml"]
    base_allowlist = base_tree / "oracle/allowlist.yaml"
    code, unreviewed = replay(shop, envs, cassette, head, tmp_path, base_allowlist)
    assert code == 1, unreviewed["summary"]
    assert unreviewed["status"] == "block"  # the base allowlist has no row
    # Reviewed: only the whole judge picks the patch's allowlist for replay and the crossrun.
    reviewed = judge_script(shop, "--head", head, env={"ORACLE_REVIEW": "1"})
    assert reviewed.returncode == 0, reviewed.output
    allowed = reviewed.step("replay")["evidence"]["allowed"]
    assert [a["field"] for a in allowed] == list(CHANGED)
    assert reviewed.step("crossrun")["evidence"]["allowed"] == [PINNING_TEST]


def test_allowlist_row_without_reviewer_fails_closed(
    shop: Path, envs: Built, cassette: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = branch(shop, "unsigned-row", copy_change_with_rows("", *CHANGED))
    code, report = reviewed_replay(shop, envs, cassette, head, tmp_path, monkeypatch)
    assert code == 2
    assert report["status"] == "error"
    assert "'reviewer' is required" in report["summary"]


def test_stale_allowlist_row_fails_closed(
    shop: Path, envs: Built, cassette: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = branch(shop, "stale-row", copy_change_with_rows("@alice", *CHANGED, "stderr.raw"))
    code, report = reviewed_replay(shop, envs, cassette, head, tmp_path, monkeypatch)
    assert code == 2
    assert report["status"] == "error"
    assert "stale" in report["summary"]
