"""The baked sessions beside the judge: record, lock, and the reviewed allowlist path."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tools.bakery import branch, edit, git, judge

pytestmark = pytest.mark.e2e  # every test here runs the whole judge


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


def test_allowlisted_contract_change_merges_after_review(shop: Path) -> None:
    head = branch(shop, "reviewed-copy", copy_change_with_rows("@alice", *CHANGED))
    unreviewed = judge(shop, "--head", head)
    assert unreviewed.returncode == 2
    assert unreviewed.statuses["replay"] == "block"  # the base allowlist has no row
    reviewed = judge(shop, "--head", head, env={"ORACLE_REVIEW": "1"})
    assert reviewed.returncode == 0, reviewed.output
    allowed = reviewed.step("replay")["evidence"]["allowed"]
    assert [a["field"] for a in allowed] == list(CHANGED)
    assert reviewed.step("crossrun")["evidence"]["allowed"] == [PINNING_TEST]


def test_allowlist_row_without_reviewer_fails_closed(shop: Path) -> None:
    head = branch(shop, "unsigned-row", copy_change_with_rows("", *CHANGED))
    verdict = judge(shop, "--head", head, env={"ORACLE_REVIEW": "1"})
    assert verdict.returncode == 2
    assert "'reviewer' is required" in verdict.step("replay")["summary"]


def test_stale_allowlist_row_fails_closed(shop: Path) -> None:
    head = branch(shop, "stale-row", copy_change_with_rows("@alice", *CHANGED, "stderr.raw"))
    verdict = judge(shop, "--head", head, env={"ORACLE_REVIEW": "1"})
    assert verdict.returncode == 2
    assert "stale" in verdict.step("replay")["summary"]
