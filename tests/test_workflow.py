"""The baked CI workflow: pinned actions and tools, no stray credentials, least privilege.

zizmor and the workflow schema run over a bake in `nox -s lint`; these tests pin down the
properties the README's threat model relies on, on the rendered file GitHub would read.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools.bakery import TEMPLATE, bake

WORKFLOW = Path(".github/workflows/oracle.yml")
CI_PINS = Path(".github/requirements-ci.txt")
# `owner/repo[/path]@<commit> # vX.Y.Z`: a tag alone can be moved, a commit cannot.
PINNED_USES = re.compile(r"^\s*(?:- )?uses: ([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$")
PIN_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


@pytest.fixture(scope="module", params=[1, 3], ids=["one-judge", "three-shards"])
def baked(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    # Answers that reach the workflow through Jinja, away from their defaults.
    return bake(
        tmp_path_factory.mktemp("workflow"),
        base_branch="release/2.x",
        oracle_ref="oracle/ledger",
        variance_runs=2,
        judge_shards=request.param,
    )


def shards(workflow: dict[Any, Any]) -> int:
    job = workflow["jobs"].get("judge-shard")
    return len(job["strategy"]["matrix"]["shard"]) if job else 1


def load(repo: Path) -> dict[Any, Any]:
    data = yaml.safe_load((repo / WORKFLOW).read_text("utf-8"))
    assert isinstance(data, dict)
    return data


def steps(workflow: dict[Any, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, step) for name, job in workflow["jobs"].items() for step in job["steps"]]


def pins(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = PIN_LINE.match(line)
        if match:
            found.setdefault(canonicalize_name(match[1]), []).append(match[2])
    return found


def test_answers_render_into_valid_workflow(baked: Path) -> None:
    workflow = load(baked)
    # PyYAML reads the bare key `on` as the boolean True (YAML 1.1).
    assert workflow[True]["pull_request"]["branches"] == ["release/2.x"]
    assert workflow["env"]["ORACLE_REF"] == "oracle/ledger"
    assert "the oracle 2 times on each of two runner" in (baked / WORKFLOW).read_text("utf-8")
    text = (baked / WORKFLOW).read_text("utf-8")
    assert "{%" not in text and "cookiecutter" not in text
    assert "${{ github.base_ref }}" in text


def test_every_action_is_pinned_to_a_commit_with_its_tag(baked: Path) -> None:
    lines = (baked / WORKFLOW).read_text("utf-8").splitlines()
    uses = [line for line in lines if re.match(r"^\s*(?:- )?uses:", line)]
    assert len(uses) == sum(1 for _, step in steps(load(baked)) if "uses" in step) > 0
    unpinned = [line.strip() for line in uses if not PINNED_USES.match(line)]
    assert unpinned == []
    # One action, one commit, one tag: a second pin of the same action is drift.
    by_action: dict[str, set[tuple[str, str]]] = {}
    for line in uses:
        match = PINNED_USES.match(line)
        assert match is not None
        by_action.setdefault(match[1], set()).add((match[2], match[3]))
    assert all(len(seen) == 1 for seen in by_action.values()), by_action


def test_only_the_pushing_job_keeps_a_credential(baked: Path) -> None:
    workflow = load(baked)
    pushers: list[str] = []
    for name, job in workflow["jobs"].items():
        pushes = any("git push" in step.get("run", "") for step in job["steps"])
        checkouts = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
        assert checkouts, name
        for step in checkouts:
            assert step["with"]["persist-credentials"] is pushes, name
        if pushes:
            pushers.append(name)
            # Its key lives in an environment that deploys from the base branch only.
            assert job["environment"] == "oracle-ref"
            assert checkouts[0]["with"]["ssh-key"] == "${{ secrets.ORACLE_REF_DEPLOY_KEY }}"
    assert pushers == ["variance-ledger"]
    # The judge runs from the base checkout, the pull request head is only its subject.
    judges = [job for name, job in workflow["jobs"].items() if name.startswith("judge")]
    assert all(job["steps"][0]["with"]["ref"] == "${{ github.base_ref }}" for job in judges)
    runs = [s.get("run", "") for job in judges for s in job["steps"]]
    assert any(run.startswith("nox -s judge -- --head origin/pr-head") for run in runs)


def test_shards_run_as_a_matrix_and_the_judge_job_merges_them(baked: Path) -> None:
    workflow = load(baked)
    jobs = workflow["jobs"]
    judge = jobs["judge"]
    count = shards(workflow)
    # The required check keeps its name whatever the answer.
    assert judge["name"] == "judge"
    if count == 1:
        assert "judge-shard" not in jobs and "needs" not in judge
        return
    shard = jobs["judge-shard"]
    assert shard["strategy"] == {"fail-fast": False, "matrix": {"shard": [1, 2, 3]}}
    assert shard["env"]["SHARDS"] == 3
    run = [s["run"] for s in shard["steps"] if "--shard" in s.get("run", "")]
    assert run == ['nox -s judge -- --head origin/pr-head --shard "${SHARD}/${SHARDS}"']
    # The merge runs whatever the shards ended with, and only reads their reports.
    assert (judge["needs"], judge["if"]) == (
        "judge-shard",
        "always() && github.event_name == 'pull_request'",
    )
    download = next(s for s in judge["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"] == {"pattern": "judge-shard-*", "path": "shards/"}
    assert "nox -s merge -- shards/judge-shard-* --out reports" in [
        s.get("run") for s in judge["steps"]
    ]
    assert not any("pr-head" in s.get("run", "") for s in judge["steps"])
    # The verdict cannot be merge unless every shard's judge itself exited 0.
    guard = next(
        s for s in judge["steps"] if s.get("if") == "needs.judge-shard.result != 'success'"
    )
    assert guard["run"].rstrip().endswith("exit 1")


def test_permissions_are_least_privilege(baked: Path) -> None:
    workflow = load(baked)
    assert workflow["permissions"] == {}
    for name, job in workflow["jobs"].items():
        assert job["permissions"] == {"contents": "read"}, name
    # A secret only where an environment guards it.
    for name, job in workflow["jobs"].items():
        if "secrets." in yaml.safe_dump(job):
            assert "environment" in job, name


def test_concurrency_is_set_without_cancel_in_progress(baked: Path) -> None:
    workflow = load(baked)
    # Per pull request and per copy of the file: a ruleset's run of the base branch's copy
    # must not be the pending run that the pull request's own copy replaces.
    group = workflow["concurrency"]["group"]
    assert "github.workflow_ref" in group and "github.event.pull_request.number" in group
    # GitHub does not run a ruleset-required workflow that uses cancel-in-progress.
    assert set(workflow["concurrency"]) == {"group"}
    assert not [name for name, job in workflow["jobs"].items() if "concurrency" in job]


def test_nox_and_uv_are_installed_hash_checked(baked: Path) -> None:
    # Every install of a tool in every job, and each one only from the hash-pinned file.
    workflow = load(baked)
    runs = [step.get("run", "") for _, step in steps(workflow)]
    installs = [run for run in runs if "install" in run and "apt-get" not in run]
    # One install in each job that runs nox: the judge (or its shards), variance, strength.
    nox_jobs = [
        j for j in workflow["jobs"].values() if any("nox -" in s.get("run", "") for s in j["steps"])
    ]
    assert len(installs) == len(nox_jobs) >= 4
    for run in installs:
        assert run == (
            "python -m pip install --require-hashes --only-binary ':all:' "
            "-r .github/requirements-ci.txt"
        )


def test_the_judge_job_installs_only_libfaketime_from_the_system(baked: Path) -> None:
    """The one system package, from the runner's signed apt sources: libfaketime, for the
    judge's clock perturbation (docs/perturbation.md), in the job that judges and nowhere else."""
    workflow = load(baked)
    judging = [name for name, step in steps(workflow) if "nox -s judge" in step.get("run", "")]
    apt = [
        (name, step["run"]) for name, step in steps(workflow) if "apt-get" in step.get("run", "")
    ]
    assert judging and [name for name, _ in apt] == judging
    assert {run for _, run in apt} == {
        "sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends faketime"
    }


def test_ci_pins_hash_every_package_of_nox_and_uv(baked: Path) -> None:
    text = (baked / CI_PINS).read_text("utf-8")
    pinned = pins(text)
    # One entry per requirement: its line and the continuation lines that carry its hashes.
    entries = re.split(r"\n(?=[A-Za-z0-9])", text)
    requirements = [e for e in entries if not e.startswith("#")]
    assert requirements and all(PIN_LINE.match(e) and HASH.search(e) for e in requirements)
    # The same nox and uv as the template's own sessions.
    dev = pins((TEMPLATE / "requirements-dev.txt").read_text("utf-8"))
    assert pinned["nox"] == dev["nox"] and pinned["uv"] == dev["uv"]
    # nox's dependency closure in this interpreter (the same nox version): each one pinned,
    # so pip's hash-checking mode has nothing left to resolve.
    missing, seen, queue = [], set(), ["nox"]
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in pinned:
            missing.append(name)
        for spec in importlib.metadata.requires(name) or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                queue.append(canonicalize_name(req.name))
    assert missing == []
    assert len(seen) > 5


def test_variance_runs_on_two_runner_images_and_one_job_merges_them(baked: Path) -> None:
    jobs = load(baked)["jobs"]
    run, merge = jobs["variance-run"], jobs["variance-ledger"]
    images = run["strategy"]["matrix"]["image"]
    # variance_machines defaults to 2: one machine per image, and at least two images.
    assert len(set(images)) >= 2
    assert run["runs-on"] == "${{ matrix.image }}"
    ran = [step["run"] for step in run["steps"] if "nox -s variance" in step.get("run", "")]
    assert ran == ['nox -s variance -- run --out "reports/variance-run-${IMAGE}.json"']
    uploads = [step["with"] for step in run["steps"] if "upload-artifact" in step.get("uses", "")]
    assert uploads == [
        {
            "name": "variance-run-${{ matrix.image }}",
            "path": "reports/variance-run-${{ matrix.image }}.json",
        }
    ]
    commands = [step.get("run", "") for step in merge["steps"]]
    merged = "nox -s variance -- merge reports/variance-run-*.json --update-ref"
    assert commands.index(merged) < next(i for i, c in enumerate(commands) if "git push" in c)
    downloads = [s["with"] for s in merge["steps"] if "download-artifact" in s.get("uses", "")]
    assert downloads[0]["pattern"] == "variance-run-*"


def test_strength_runs_without_credentials_and_the_ledger_job_stores_its_score(
    baked: Path,
) -> None:
    jobs = load(baked)["jobs"]
    measure, ledger = jobs["strength"], jobs["variance-ledger"]
    assert measure["permissions"] == {"contents": "read"}
    assert [s["run"] for s in measure["steps"] if "strength" in s.get("run", "")] == [
        "nox -s strength"
    ]
    commands = [step.get("run", "") for step in ledger["steps"]]
    stored = commands.index("nox -s strength -- --store reports/strength.json")
    assert stored < next(i for i, c in enumerate(commands) if "git push" in c)
    # The ledger still moves when the strength run fails, never without the variance runs.
    assert "needs.variance-run.result == 'success'" in ledger["if"]
