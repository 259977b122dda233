"""Evidence reused where its inputs did not change (issue 28, scripts/_gate/runs/reuse.py).

Real builds of the example and real judges: a patch whose build is the parent's runs each
parent side once; a second judgment of a base reuses the parent runs an earlier one kept, a
base with another test file or another build does not; the oracle's and the parent's
environments are kept and used again while their files are as built; a judgment that runs the
patch's code unconfined keeps nothing. The honest changes each must still judge right.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _gate.core.seal import build_digest
from _gate.plugin.confine import LEVEL_VARIABLE
from _gate.runs.envs import build_env
from _gate.runs.kept_envs import LIMIT_ENV
from _gate.runs.reuse import CACHE_ENV, REUSED, unsealed

from tools.bakery import Verdict, branch, edit, git, judge

RULE = "src/shop/discounts.py"
BOTH_SIDES = ("replay", "oracle", "crossrun")  # the steps that run the parent and the patch


def readme(repo: Path) -> None:
    with (repo / "README.md").open("a", encoding="utf-8") as text:
        text.write("\nA line of docs, which the wheel's METADATA copies.\n")


def comment(repo: Path) -> None:
    """An honest change of the code: another build, which judges as before."""
    rule = repo / RULE
    rule.write_text("# A comment in the code.\n" + rule.read_text("utf-8"), "utf-8")


def reused(verdict: Verdict, side: str) -> list[str]:
    """The steps whose evidence says the `side`'s run was reused."""
    found = []
    for name in BOTH_SIDES:
        evidence = verdict.step(name)["evidence"]
        if isinstance(evidence, dict) and evidence.get(f"{side}_run") == REUSED:
            found.append(name)
    return found


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own, empty: the suite's shared one would hold the runs
    of other tests' judgments of the same bake."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


def test_two_builds_of_the_same_files_have_one_digest_and_any_other_byte_makes_two(
    shop: Path, tmp_path: Path, wheelhouse: Path
) -> None:
    requirements = shop / "scripts/requirements-judge.txt"

    def built(name: str, change: object = None) -> Path:
        tree = tmp_path / f"tree-{name}"
        ref = branch(shop, f"digest-{name}", change) if callable(change) else "main"
        git(shop, "worktree", "add", "--quiet", "--detach", str(tree), ref)
        return build_env(tree, tmp_path / name, wheelhouse, requirements).parent.parent

    parent, again, docs, code = (
        built("parent"),
        built("again"),
        built("docs", readme),
        built("code", comment),
    )
    assert build_digest(parent) == build_digest(again)  # other paths, other install times
    assert build_digest(docs) == build_digest(parent)  # the README in METADATA aside
    assert build_digest(code) != build_digest(parent)
    # One file written into the environment beside the wheel's (pytest's, say): another build.
    plugin = next(again.glob("lib/python*/site-packages/_pytest/__init__.py"))
    plugin.write_text(plugin.read_text("utf-8") + "\n# forged\n", "utf-8")
    assert build_digest(again) != build_digest(parent)
    for name in ("parent", "again", "docs", "code"):
        git(shop, "worktree", "remove", "--force", str(tmp_path / f"tree-{name}"))


@pytest.mark.e2e
def test_a_docs_only_patch_runs_each_parent_side_at_most_once_and_a_code_patch_runs_both(
    shop: Path, cache: Path
) -> None:
    docs = judge(shop, "--head", branch(shop, "reuse-docs", readme))
    assert docs.report["verdict"] == "merge", docs.output[-2000:]
    assert docs.step("build")["summary"].endswith(
        "the patch's build is the parent's, file for file"
    )
    assert reused(docs, "patch") == list(BOTH_SIDES)
    for name in ("replay", "oracle"):
        assert f"its run {REUSED}" in docs.step(name)["summary"]
    # The crossrun runs the base's tests on both builds: one build, the same tests, no run.
    crossrun = docs.step("crossrun")
    assert crossrun["summary"].startswith("nothing ran: the patch's build is"), crossrun
    assert crossrun["evidence"]["ran"] is False
    assert reused(docs, "parent") == ["crossrun"]
    assert docs.step("tests")["summary"].startswith(f"patch tests: not run, {REUSED}")

    code = judge(shop, "--head", branch(shop, "reuse-code", comment))
    assert code.report["verdict"] == "merge", code.output[-2000:]
    assert reused(code, "patch") == []


def breaks_the_rule(repo: Path) -> None:
    """A patch the crossrun blocks: a parent test of the rule fails on it."""
    edit(repo / RULE, "    return amount\n", "    return amount + 1\n")


@pytest.mark.e2e
def test_a_second_judgment_of_a_base_reuses_the_parent_runs_it_kept_and_still_blocks(
    shop: Path, cache: Path
) -> None:
    first = judge(shop, "--head", branch(shop, "kept-first", comment))
    assert first.report["verdict"] == "merge", first.output[-2000:]
    assert reused(first, "parent") == []
    # The parent's oracle and crossrun runs, and the patch's crossrun run: a base's once it lands
    # (and the base's recording, where no judgment of this bake recorded it before this one).
    runs = [
        path for path in cache.glob("*.json") if "outcomes" in (unsealed(path.read_bytes()) or {})
    ]
    assert len(runs) == 3
    assert first.step("build")["summary"].startswith(ALL_FRESH)
    # The oracle's, the parent's and the patch's environments, each kept with its digest.
    envs = sorted(path for path in (cache / "envs").iterdir() if path.is_dir())
    assert [sorted(p.name for p in env.iterdir()) for env in envs] == [["digest.json", "env"]] * 3

    # The cache held to one environment: its patch's built, the judgment deletes the least
    # recently used beyond it that no judgment uses, the first patch's alone
    # (_gate/runs/kept_envs.py).
    broken = branch(shop, "kept-broken", breaks_the_rule)
    second = judge(shop, "--head", broken, env={LIMIT_ENV: "1"})
    assert reused(second, "parent") == ["oracle", "crossrun"]
    assert second.report["verdict"] == "block", second.output[-2000:]
    assert second.step("crossrun")["evidence"]["failures"], second.step("crossrun")
    assert second.step("build")["summary"].startswith(
        "patch built into a fresh offline environment; the parent and oracle environments kept"
    )
    after = sorted(path for path in (cache / "envs").iterdir() if path.is_dir())
    assert len(after) == 3, after
    assert len(set(after) & set(envs)) == 2, after
    rules = [
        rule for env in after for rule in env.glob(f"env/lib/python*/site-packages/{RULE[4:]}")
    ]
    assert len(rules) == 2  # the parent's and the second patch's; the oracle's has no shop
    assert not any(rule.read_text("utf-8").startswith("# A comment") for rule in rules)

    # A base with one more test is another input of the parent's runs and build: they run
    # again. A file planted in the kept oracle environment since it was built: not used.
    def one_more_test(repo: Path) -> None:
        (repo / "tests/test_more.py").write_text("def test_more() -> None:\n    assert 1\n")

    for env in envs:
        for site in env.glob("env/lib/python*/site-packages"):
            (site / "planted.pth").write_text("import os\n", "utf-8")
    base = branch(shop, "kept-new-base", one_more_test)
    third = judge(shop, "--base", base, "--head", branch(shop, "kept-third", comment, base))
    assert third.report["verdict"] == "merge", third.output[-2000:]
    assert reused(third, "parent") == []
    assert "tests/test_more.py::test_more" in third.step("crossrun")["evidence"]["parent"]
    built = third.step("build")["summary"]
    assert built.startswith(ALL_FRESH)
    assert "the oracle environment kept in the cache changed since it was built" in built


ALL_FRESH = "parent, patch and oracle built into fresh offline environments; "


def promise_test(repo: Path) -> None:
    """A base test of a file outside the tests, which no kept run's key holds."""
    (repo / "docs").mkdir(exist_ok=True)
    (repo / "docs/promise.txt").write_text("kept\n", "utf-8")
    (repo / "tests/test_promise.py").write_text(
        "from pathlib import Path\n\n\ndef test_promise() -> None:\n"
        "    assert Path('docs/promise.txt').read_text('utf-8') == 'kept\\n'\n"
    )


def broken_promise(repo: Path) -> None:
    (repo / "docs/promise.txt").write_text("broken\n", "utf-8")


def another_comment(repo: Path) -> None:
    rule = repo / RULE
    rule.write_text("# Another comment in the code.\n" + rule.read_text("utf-8"), "utf-8")


@pytest.mark.e2e
def test_a_patch_that_lands_brings_its_environment_and_its_run_to_the_next_judgment(
    shop: Path, cache: Path
) -> None:
    """The patch's environment and its run of the base's tests are kept under the keys they
    have once it is a base: the next judgment's parent side is ready. A test the patch loses
    that reads a file outside the tests (which no key holds) runs again on the parent now."""
    base = branch(shop, "landing-base", promise_test)
    landed = branch(shop, "landing-first", comment, base)
    first = judge(shop, "--base", base, "--head", landed)
    assert first.report["verdict"] == "merge", first.output[-2000:]
    assert reused(first, "parent") == []

    broken = branch(shop, "landing-broken", breaks_the_rule, landed)
    second = judge(shop, "--base", landed, "--head", broken)
    assert second.report["verdict"] == "block", second.output[-2000:]
    # The oracle's run keys the whole tree (an oracle may read any file): the patch's run of
    # it is no base's. The crossrun's keys the tests and pytest's configuration.
    assert reused(second, "parent") == ["crossrun"]
    assert second.step("crossrun")["evidence"]["failures"], second.step("crossrun")
    assert second.step("build")["summary"].startswith(
        "patch built into a fresh offline environment; the parent and oracle environments kept"
    )

    # The same judgment again (a CI re-run): every environment is kept, the patch's too.
    again = judge(shop, "--base", landed, "--head", broken)
    assert again.report["verdict"] == "block", again.output[-2000:]
    assert again.step("build")["summary"].startswith(
        "the parent, patch and oracle environments kept from an earlier build"
    )

    # The new base breaks its own test: its build is the one landed, its tests too, so the
    # kept run says the test passed. The patch fails it: the parent, run now, does too.
    moved = branch(shop, "landing-moved", broken_promise, landed)
    third = judge(
        shop, "--base", moved, "--head", branch(shop, "landing-next", another_comment, moved)
    )
    crossrun = third.step("crossrun")
    assert third.report["verdict"] == "merge", third.output[-2000:]
    assert reused(third, "parent") == ["crossrun"]
    promise = "tests/test_promise.py::test_promise"
    assert crossrun["evidence"]["parent_not_passing"] == [promise], crossrun
    assert crossrun["evidence"]["patch"][promise] == "failed", crossrun


def kept_files(cache: Path) -> dict[str, bytes]:
    return {path.relative_to(cache).as_posix(): path.read_bytes() for path in cache.rglob("*.json")}


@pytest.mark.e2e
def test_a_judgment_that_runs_the_patch_unconfined_keeps_nothing_and_reuses_nothing(
    shop: Path, cache: Path
) -> None:
    kept = judge(shop, "--head", branch(shop, "unconfined-kept", comment))
    assert kept.report["verdict"] == "merge", kept.output[-2000:]
    before = kept_files(cache)
    assert any(name.startswith("envs/") for name in before)
    assert len(before) > 2

    def best_effort(repo: Path) -> None:
        edit(repo / "oracle/judge.yaml", "sandbox: required", "sandbox: best-effort")

    base = branch(shop, "unconfined-base", best_effort)
    head = branch(shop, "unconfined-head", comment, base)
    free = judge(shop, "--base", base, "--head", head, env={LEVEL_VARIABLE: "none"})
    assert free.report["confinement"] == "unconfined", free.output[-2000:]
    assert free.report["verdict"] == "merge", free.output[-2000:]
    assert reused(free, "parent") == []
    assert free.step("build")["summary"].startswith(ALL_FRESH)
    assert kept_files(cache) == before
