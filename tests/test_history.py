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

tests/data/markdown-slice.bundle holds four slices of Python-Markdown/markdown's first-parent
history (a unittest-style suite), made the same way, one branch each (no HEAD: fetch the
branches): `attr-list`, a root with the tree of e4ab4a610edc and the commits of
e4ab4a610edc..3d8afc6f89e1; `backticks`, a root with the tree of 5354daf61814 and the commits
of 5354daf61814..9933a0a4699f; `toc-depth` and `toc-sanitation`, a root with the tree of
613ad502a4cf~1 (e4ab4a610edc~1) and that one commit. Three of their commits rename a test and
edit it in the same commit, keeping its checks: 9edba85fc1 (test_abbr_ignore_special_chars
narrowed into test_abbr_ignore_backslash after a deliberate behaviour change), 3d8afc6f89
(test_empty_list becomes test_empty_attr_list, its keyword argument moved to the class's
`default_kwargs`) and a5ee2b4aad (test_footnote_order becomes test_footnote_order_by_doc_order
with an explicit config): each must merge. 613ad502a4 and e4ab4a610e move the TOC tests to
`assertMarkdownRenders` of `markdown/test_tools.py` (a base class in the package), folding
checks of `md.toc` into its new `expected_attrs=` dict, which the helper checks in a loop; the
second also renames testReset and testTitle with `self.md` made local: both must merge.
9933a0a469 reverts a feature with its six tests: it must block.
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


MARKDOWN = history.TEMPLATE / "tests" / "data" / "markdown-slice.bundle"
MARKDOWN_SLICES = ("attr-list", "backticks", "toc-depth", "toc-sanitation")
LINKS = "tests/test_syntax/inline/test_links.py"
# Upstream commit -> (verdict, the test a blocking finding must name), for every first-parent
# commit of both Markdown slices whose diff touches tests/; the other five do not touch it.
MARKDOWN_EXPECTED: dict[str, tuple[str, str]] = {
    "9edba85fc14f034b7109534220702bf60178ff15": ("merge", ""),  # renamed, narrowed
    "3d8afc6f89e169522f44c1bbec15f66dc359eccb": ("merge", ""),  # renamed, kwarg to the class
    "a5ee2b4aad05531898ab8fd726c7ece31ddadf8b": ("merge", ""),  # renamed, explicit config
    "2b49115b1002142afbd84b3002f13c0e98a0f487": ("merge", ""),  # adds tests
    "fb6b27a6ff90980b5bcb0cd51528a7c9dc3a93ca": ("merge", ""),  # adds a test
    "07dfa4eb43f7a2ab3181b4f842a960a03a6c1221": ("merge", ""),  # adds six tests
    "613ad502a4cf2293901e8f67690c198fc22c8f88": ("merge", ""),  # checks into expected_attrs
    "e4ab4a610edc6332ce81a53aa4ae6f97516ce461": ("merge", ""),  # the same, and two renames
    "9933a0a4699f3dea91f46528a2bf54863f531c08": (
        "block",
        f"{LINKS}::TestInlineLinks::test_monospaced_title",  # the revert deletes it
    ),
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
    assert_reviewers_verdict(verdicts[upstream], *EXPECTED[upstream])


def assert_reviewers_verdict(got: dict[str, Any], verdict: str, lost: str | None) -> list[str]:
    """The commit's verdict, and the test a block names; returns the findings for more checks."""
    findings = [f"{f['rule']} {finding_test(f)}: {f['reason']}" for f in got["findings"]]
    assert got["verdict"] == verdict, (got["summary"], findings)
    if lost:
        assert lost in {finding_test(f) for f in got["findings"]}, findings
    return findings


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
    assert len(block) == 1, out
    assert " block " in block[0], out
    assert f"{first['rule']} {first['path']}:{first['line']} " in block[0], out
    assert out[-2].startswith("history: "), out
    assert "2 touch tests" in out[-2], out
    assert out[-1].startswith(f"  block: {revert['commit'][:10]} Revert"), out


def test_bad_range_is_refused(tmp_path: Path) -> None:
    clone = tmp_path / "sqlparse"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(clone)], check=True)
    assert history.main([str(clone), "--range", "HEAD..HEAD", "--json", str(tmp_path / "h")]) == 2
    assert not (tmp_path / "h").exists()


def git_out(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def markdown_verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The harness over both Markdown slices, once: upstream commit -> that commit's verdict."""
    root = tmp_path_factory.mktemp("markdown")
    clone = root / "markdown"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    git_out(clone, "fetch", "-q", str(MARKDOWN), "refs/heads/*:refs/heads/*")
    found: dict[str, dict[str, Any]] = {}
    for branch in MARKDOWN_SLICES:
        first = git_out(clone, "rev-list", "--max-parents=0", branch).strip()
        report = root / f"{branch}.json"
        argv = [str(clone), "--range", f"{first}..{branch}", "--first-parent"]
        assert history.main([*argv, "--json", str(report)]) == 0
        trailers = git_out(
            clone, "log", "--format=%H %(trailers:key=Original-commit,valueonly)", branch
        )
        upstream = dict(line.split() for line in trailers.splitlines() if line.strip())
        payload = json.loads(report.read_text("utf-8"))
        found.update({upstream[c["commit"]]: c for c in payload["commits"]})
    return found


def test_the_harness_judges_the_test_touching_markdown_commits(
    markdown_verdicts: dict[str, dict[str, Any]],
) -> None:
    assert sorted(markdown_verdicts) == sorted(MARKDOWN_EXPECTED)


@pytest.mark.parametrize(
    "upstream", list(MARKDOWN_EXPECTED), ids=[c[:10] for c in MARKDOWN_EXPECTED]
)
def test_each_markdown_commit_gets_the_reviewers_verdict(
    markdown_verdicts: dict[str, dict[str, Any]], upstream: str
) -> None:
    got = markdown_verdicts[upstream]
    verdict, lost = MARKDOWN_EXPECTED[upstream]
    findings = assert_reviewers_verdict(got, verdict, lost)
    if lost:
        # Six tests deleted, none added: nothing to take for a rename.
        deleted = {finding_test(f) for f in got["findings"] if f["rule"] == "deleted-test"}
        assert len(deleted) == 6, findings
