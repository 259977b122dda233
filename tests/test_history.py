"""The assert inventory on a pinned slice of a real project's history (issue 8).

tests/data/sqlparse-slice.bundle holds 14 first-parent commits of andialbrecht/sqlparse
(pytest suite): a root commit with the tree of 791e25de46f4 (its history left out, so the bundle
stands alone), then every first-parent commit of 791e25de46f4..48bd14ea3947 with its original
tree, author, dates and message, plus an `Original-commit:` trailer naming the upstream commit.
Made from a clone of github.com/andialbrecht/sqlparse with:

    for c in 791e25de46f4 $(git rev-list --first-parent --reverse 791e25de46f4..48bd14ea3947); do
        # GIT_AUTHOR_*/GIT_COMMITTER_* exported from `git log -1 --format=%an/%ae/%aD/... $c`
        new=$(git -C slice commit-tree $c^{tree} ${parent:+-p $parent} -F msg)  # msg: see above
        parent=$new
    done
    git -C slice update-ref refs/heads/main $parent
    git -C slice bundle create sqlparse-slice.bundle HEAD main

Each test-touching commit gets the verdict a reviewer gives after reading its diff. Two of them
really lose a check: a8de06e16d reverts a regression test, 8eb778ca73 drops `assert res == ''`
from test_strip_comments_multi. 2f9c7ec38f moves six hint checks out of
test_strip_comments_single and test_strip_comments_multi into a new
test_strip_comments_preserves_hint, losing none of them: it must merge.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tools import history

BUNDLE = history.TEMPLATE / "tests" / "data" / "sqlparse-slice.bundle"
# Upstream commit -> (verdict, the test a blocking finding must name), for every first-parent
# commit of the slice whose diff touches tests/; the other six do not touch it.
EXPECTED: dict[str, tuple[str, str]] = {
    "b253bb12292a3b8aac9a94c056debe006da8ce81": ("merge", ""),  # adds test_escaped_quotes
    "a8de06e16d3b3bbf7fdb2f176e1e5153ca3f98a0": (
        "block",
        "tests/test_split.py::test_escaped_quotes",  # the revert deletes it
    ),
    "0c4902f3f7aafa8c2e63a375ec307c210842f543": ("merge", ""),  # adds a test
    "b126ba5b2004474e9ad899456c077f976b761319": ("merge", ""),  # adds a parametrize case
    "af6df6c6627b5fcf98bc7bb46f780e1fa0d1a7ef": ("merge", ""),  # adds hint checks
    "8eb778ca73c4b297b9319488835df295ef815e7e": (
        "block",
        "tests/test_format.py::TestFormat::test_strip_comments_multi",  # loses `res == ''`
    ),
    "2f9c7ec38f98c004ee8c328ed24ba49bd19951bc": ("merge", ""),  # moves the hint checks
}


def finding_test(finding: dict[str, Any]) -> str:
    # The report names the test as `test`; reports of before issue 8 called it `id`.
    return str(finding.get("test") or finding.get("id") or "")


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The harness over the whole slice, once: upstream commit -> that commit's verdict."""
    root = tmp_path_factory.mktemp("history")
    clone = root / "sqlparse"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(clone)], check=True)
    first = subprocess.run(
        ["git", "-C", str(clone), "rev-list", "--max-parents=0", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    report = root / "history.json"
    argv = [str(clone), "--range", f"{first}..HEAD", "--first-parent", "--json", str(report)]
    assert history.main(argv) == 0
    trailers = subprocess.run(
        ["git", "-C", str(clone), "log", "--format=%H %(trailers:key=Original-commit,valueonly)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    upstream = dict(line.split() for line in trailers.splitlines() if line.strip())
    payload = json.loads(report.read_text("utf-8"))
    assert payload["summary"]["commits"] == 13
    return {upstream[c["commit"]]: c for c in payload["commits"]}


def test_the_harness_judges_exactly_the_test_touching_commits(
    verdicts: dict[str, dict[str, Any]],
) -> None:
    assert sorted(verdicts) == sorted(EXPECTED)


@pytest.mark.parametrize("upstream", list(EXPECTED), ids=[c[:10] for c in EXPECTED])
def test_each_commit_gets_the_reviewers_verdict(
    verdicts: dict[str, dict[str, Any]], upstream: str
) -> None:
    verdict, lost = EXPECTED[upstream]
    got = verdicts[upstream]
    findings = [f"{f['rule']} {finding_test(f)}: {f['reason']}" for f in got["findings"]]
    assert got["verdict"] == verdict, (got["summary"], findings)
    if lost:
        assert lost in {finding_test(f) for f in got["findings"]}, findings


def test_history_reports_a_block_with_its_first_finding(
    verdicts: dict[str, dict[str, Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The printed line carries the verdict and what to read first; the summary the list."""
    revert = verdicts["a8de06e16d3b3bbf7fdb2f176e1e5153ca3f98a0"]
    assert revert["findings"], revert
    clone = tmp_path / "sqlparse"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(clone)], check=True)
    span = f"{revert['parent']}^..{revert['commit']}"
    argv = [str(clone), "--range", span, "--first-parent", "--json", str(tmp_path / "h.json")]
    assert history.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    first = revert["findings"][0]
    block = [line for line in out if line.startswith(revert["commit"][:10])]
    assert len(block) == 1 and " block " in block[0], out
    assert f"{first['rule']} {first['path']}:{first['line']} " in block[0], out
    assert out[-2].startswith("history: ") and "2 touch tests" in out[-2], out
    assert out[-1].startswith(f"  block: {revert['commit'][:10]} Revert"), out


def test_bad_range_is_refused(tmp_path: Path) -> None:
    clone = tmp_path / "sqlparse"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(clone)], check=True)
    assert history.main([str(clone), "--range", "HEAD..HEAD", "--json", str(tmp_path / "h")]) == 2
    assert not (tmp_path / "h").exists()
