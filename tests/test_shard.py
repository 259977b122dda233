"""Sharding (issue 10): a judgment split across runners and merged gives the unsharded verdict.

The replay step runs as the judge runs it (`helpers.run_script`, a subprocess per step, the judge's
own report), once whole and once per shard, on real executables: printf is the parent build,
a shell script that answers differently for every case whose number ends in 7 is the patch.
scripts/merge_shards.py then merges the shard folders.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import merge_shards
import pytest
import yaml
from _gate.judge.lanes import Judge
from _gate.judge.run_state import begin
from _gate.plugin.shard import Shard, parse_shard
from _gate.runs.cassettes import cassette_path
from judge import publish

from tests.helpers import SCRIPTS, run_script

BASE, HEAD = "b" * 40, "c" * 40
PRINTF = Path("/usr/bin/printf")
PATCH = """#!/bin/sh
case "$2" in
  *7) printf '{"n": -1}\\n' ;;
  *) exec printf "$@" ;;
esac
"""


def write_cases(tmp: Path, count: int) -> Path:
    cases = [
        {"id": f"c{i}", "argv": ['{"n": %s}\\n', str(i)], "compare": ["exit_code", "stdout.json"]}
        for i in range(count)
    ]
    path = tmp / f"cases-{count}.yaml"
    path.write_text(yaml.safe_dump({"cases": cases}), "utf-8")
    return path


def allowlist(tmp: Path, *ids: str) -> Path:
    rows = [
        {"id": i, "field": "stdout.json", "base": BASE, "reason": "intended", "reviewer": "@r"}
        for i in ids
    ]
    path = tmp / f"allow-{len(ids)}.yaml"
    path.write_text(yaml.safe_dump({"allow": rows}), "utf-8")
    return path


@pytest.fixture
def patch_cli(tmp_path: Path) -> Path:
    path = tmp_path / "patch-bin" / "cli"
    path.parent.mkdir()
    path.write_text(PATCH, "utf-8")
    path.chmod(0o755)
    return path


def recorded(tmp: Path, cases: Path) -> Path:
    """The whole parent cassette, recorded by the step script."""
    out = tmp / f"{cases.stem}.cassette.json"
    j = Judge(repo=tmp, reports=tmp / f"record-{cases.stem}", parent=SCRIPTS.parent)
    j.reports.mkdir()
    # Sharding, not perturbation (tests/test_perturb.py): a recording without perturbed runs
    # has replay run none, so each case costs 2 runs here, not 6.
    args = ("--command", PRINTF, "--base", BASE, "--out", out, "--cases", cases, "--perturb", "")
    assert run_script(j, "record", "record_cassettes.py", *args, "--fixtures", tmp) == 0, j.steps
    return out


def replayed(
    tmp: Path, name: str, cassette: Path, cases: Path, patch: Path, allow: Path, shard: str
) -> Path:
    """One runner's judgment: replay of its shard, reported as the judge reports it."""
    j = Judge(tmp, tmp / name, BASE, HEAD, SCRIPTS.parent, shard=parse_shard(shard))
    j.reports.mkdir()
    commands = ("--parent-command", PRINTF, "--patch-command", patch)
    args: tuple[str | Path, ...] = (
        "--cassette",
        cassette,
        *commands,
        "--cases",
        cases,
        "--fixtures",
        tmp,
    )
    args += ("--allowlist", allow, "--base", BASE, "--shard", shard)
    run_script(j, "replay", "replay_cassettes.py", *args)
    publish(j, "", begin(j.reports))
    return j.reports


def merged(tmp: Path, *folders: Path) -> tuple[int, dict[str, Any]]:
    out = tmp / "merged"
    code = merge_shards.main([*map(str, folders), "--out", str(out), "--repo", str(tmp)])
    return code, json.loads((out / "judge-report.json").read_text("utf-8"))


def findings(folder: Path) -> dict[str, list[tuple[str, str]]]:
    evidence = json.loads((folder / "replay-report.json").read_text("utf-8"))["evidence"]
    keys = ("mismatches", "allowed", "drift", "stale_allow_rows")
    return {key: sorted((row["id"], row["field"]) for row in evidence[key]) for key in keys}


# Enough cases that each shard owns many (2,400 processes): the suite proves the merge;
# `nox -s bench` measures replay at scale (its replay ratio replays a thousand cases).
CASES = 400


@pytest.mark.e2e(heavy=True)
def test_four_hundred_cases_in_four_shards_merge_to_the_unsharded_verdict_and_findings(
    tmp_path: Path, patch_cli: Path
) -> None:
    cases = write_cases(tmp_path, CASES)
    cassette = recorded(tmp_path, cases)
    # One reviewed row: the shard that owns c17 uses it, the three others must not call it stale.
    allow = allowlist(tmp_path, "c17")
    whole = replayed(tmp_path, "whole", cassette, cases, patch_cli, allow, "1/1")
    shards = [
        replayed(tmp_path, f"shard-{i}", cassette, cases, patch_cli, allow, f"{i}/4")
        for i in range(1, 5)
    ]
    code, report = merged(tmp_path, *reversed(shards))
    unsharded = json.loads((whole / "judge-report.json").read_text("utf-8"))

    changed = sorted((f"c{i}", "stdout.json") for i in range(CASES) if i % 10 == 7)
    assert (code, report["verdict"]) == (1, unsharded["verdict"]) == (1, "block")
    assert findings(tmp_path / "merged") == findings(whole)
    assert findings(whole)["mismatches"] == changed
    assert findings(whole)["allowed"] == [("c17", "stdout.json")]
    replay = next(step for step in report["steps"] if step["name"] == "replay")
    assert replay["evidence"]["shard"] == {"count": 4, "owned": CASES, "total": CASES}
    assert replay["evidence"]["cases"] == CASES
    assert sorted(replay["evidence"]["shards"]) == ["1/4", "2/4", "3/4", "4/4"]


@pytest.fixture
def small(tmp_path: Path, patch_cli: Path) -> dict[str, Any]:
    cases = write_cases(tmp_path, 40)
    return {
        "cases": cases,
        "cassette": recorded(tmp_path, cases),
        "patch": patch_cli,
        "allow": allowlist(tmp_path),
    }


def shard_folders(tmp: Path, small: dict[str, Any], count: int, prefix: str = "s") -> list[Path]:
    args = (small["cassette"], small["cases"], small["patch"], small["allow"])
    return [replayed(tmp, f"{prefix}{i}", *args, f"{i}/{count}") for i in range(1, count + 1)]


def test_a_stale_row_fails_closed_in_the_one_shard_that_owns_its_case(
    tmp_path: Path, small: dict[str, Any]
) -> None:
    small["allow"] = allowlist(tmp_path, "c3")  # c3 does not change: the row is stale
    folders = shard_folders(tmp_path, small, 3)
    statuses = [
        json.loads((f / "replay-report.json").read_text("utf-8"))["status"] for f in folders
    ]
    code, report = merged(tmp_path, *folders)

    assert statuses.count("error") == 1
    # The other shards prove fields changed: that blocks, and the stale row is still shown.
    assert (code, report["verdict"]) == (1, "block")
    replay = next(step for step in report["steps"] if step["name"] == "replay")
    assert "1 error" in replay["summary"], replay["summary"]
    assert findings(tmp_path / "merged")["stale_allow_rows"] == [("c3", "stdout.json")]


def needs_review_on_shard(
    folder: Path, path: str = "oracle/allowlist.yaml", rule: str = "/oracle/"
) -> list[dict[str, str]]:
    """The shard's write-set found a protected path (write-set runs on shard 1 only), reported
    as write_set.py and the judge report it; returns the protected rows. By default the
    allowlist, which a review lets the judge read from the patch: the replay's block may be
    lifted by it."""
    rows = [{"path": path, "status": "M", "rule": rule}]
    summary = "patch touches protected paths a code owner must review: ..."
    own = {"step": "write-set", "status": "needs-review", "exit_code": 2, "summary": summary}
    (folder / "write-set.json").write_text(json.dumps({**own, "evidence": {"protected": rows}}))
    judged = folder / "judge-report.json"
    report = json.loads(judged.read_text("utf-8"))
    step = {"name": "write-set", "status": "needs-review", "summary": summary, "seconds": 0.0}
    report["steps"].insert(0, {**step, "evidence": {"report": "write-set.json"}})
    judged.write_text(json.dumps(report), "utf-8")
    return rows


def test_a_shard_that_needs_review_makes_the_merge_need_it(
    tmp_path: Path, small: dict[str, Any]
) -> None:
    folders = shard_folders(tmp_path, small, 2)
    rows = needs_review_on_shard(folders[0])
    code, report = merged(tmp_path, *folders)

    assert (code, report["verdict"]) == (2, "needs-review")
    assert report["review"]["protected"] == rows
    for name in ("judge-report.json", "write-set.json", "replay-report.json"):
        assert json.loads((tmp_path / "merged" / name).read_text())["schema_version"] == 2
    rerun = f"ORACLE_REVIEW=1 nox -s judge -- --base {BASE} --head {HEAD}"
    assert report["review"]["rerun"] == rerun
    # An error besides the review, here a shard missing, is what the verdict says.
    code, report = merged(tmp_path, folders[0])
    assert (code, report["verdict"]) == (2, "error")
    assert "review" not in report


def test_a_block_beside_a_review_that_cannot_lift_it_is_the_merges_verdict(
    tmp_path: Path, small: dict[str, Any]
) -> None:
    folders = shard_folders(tmp_path, small, 2)
    rows = needs_review_on_shard(folders[0], ".github/workflows/ci.yml", "/.github/workflows/")
    code, report = merged(tmp_path, *folders)
    assert (code, report["verdict"]) == (1, "block")
    assert report["review"]["protected"] == rows  # listed beside the block


def test_a_missing_shard_fails_closed_naming_it(tmp_path: Path, small: dict[str, Any]) -> None:
    folders = shard_folders(tmp_path, small, 3)
    code, report = merged(tmp_path, folders[0], folders[2])

    assert (code, report["verdict"]) == (2, "error")
    assert report["steps"][-1]["summary"].startswith("no report of shard 2/3")


def test_a_shard_given_twice_fails_closed(tmp_path: Path, small: dict[str, Any]) -> None:
    folders = shard_folders(tmp_path, small, 2)
    code, report = merged(tmp_path, folders[0], folders[0], folders[1])

    assert code == 2
    assert "shard 1/2 also in" in report["steps"][-1]["summary"]


@pytest.mark.parametrize(
    ("key", "value"), [("head", "d" * 40), ("base", "e" * 40), ("run", "99.1")]
)
def test_shards_of_another_judgment_fail_closed(
    tmp_path: Path, small: dict[str, Any], key: str, value: str
) -> None:
    folders = shard_folders(tmp_path, small, 2)
    path = folders[1] / "judge-report.json"
    report = json.loads(path.read_text("utf-8"))
    path.write_text(json.dumps({**report, key: value}), "utf-8")
    code, merged_report = merged(tmp_path, *folders)

    assert code == 2
    assert f"field {key!r}" in merged_report["steps"][-1]["summary"]


def test_an_unsharded_report_is_not_a_shard(tmp_path: Path, small: dict[str, Any]) -> None:
    args = (small["cassette"], small["cases"], small["patch"], small["allow"])
    whole = replayed(tmp_path, "whole", *args, "1/1")
    code, report = merged(tmp_path, whole)

    assert code == 2
    assert "names no shard of a split judgment" in report["steps"][-1]["summary"]


def test_shards_split_from_different_cases_do_not_add_up(
    tmp_path: Path, small: dict[str, Any]
) -> None:
    first = shard_folders(tmp_path, small, 2)[0]
    fewer = write_cases(tmp_path, 39)  # the last case gone
    args = (recorded(tmp_path, fewer), fewer, small["patch"], small["allow"])
    second = replayed(tmp_path, "other", *args, "2/2")
    code, report = merged(tmp_path, first, second)

    assert code == 2
    assert "replay: the shards hold" in report["steps"][-1]["summary"]


def test_a_folder_without_a_report_fails_closed_with_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, report = merged(tmp_path, empty)

    assert code == 2
    assert report["steps"][-1]["summary"].startswith(f"{empty}/judge-report.json: not a shard")
    assert "\n" not in report["steps"][-1]["summary"]
    written = sorted(os.listdir(tmp_path / "merged"))
    assert written == ["judge-report.json", "judge-summary.md", "judge.sarif"]


@pytest.mark.parametrize("text", ["0/4", "5/4", "2/0", "a/b", "2", "-1/4", "1/4/2"])
def test_a_shard_that_is_not_i_of_n_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is not I/N"):
        parse_shard(text)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_every_id_belongs_to_exactly_one_shard(count: int) -> None:
    ids = [f"tests/test_x.py::test_{i}[{i % 5}]" for i in range(500)] + ["é", "", "a::b"]
    owners = [[i for i in range(1, count + 1) if Shard(i, count).owns(ident)] for ident in ids]
    assert all(len(found) == 1 for found in owners)
    if count > 1:
        assert len({found[0] for found in owners}) == count


def test_each_shard_keeps_its_own_cassette(tmp_path: Path) -> None:
    """A shard's recording holds its cases only: it never stands where the whole one does."""
    paths = [cassette_path(tmp_path, BASE, Shard(i, 4)) for i in range(1, 5)]
    whole = cassette_path(tmp_path, BASE)
    assert len({whole, *paths}) == 5
    assert {path.parent for path in paths} == {whole.parent}
