"""The baked CI workflow: pinned actions and tools, no stray credentials, least privilege.

zizmor and the workflow schema run over a bake in `nox -s lint`; these tests pin down the
properties the README's threat model relies on, on the rendered file GitHub would read.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
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
# The jobs after the judge that put its results where reviewers look, each with the one write
# permission it needs: neither checks out or runs anything of the repository.
REPORTERS = {
    "code-scanning": {"actions": "read", "security-events": "write"},
    "pr-comment": {"pull-requests": "write"},
}
# The judge job's artifact of the verdict's files, which is all the reporters read.
SUMMARY_FILES = ["reports/judge-summary.md", "reports/judge-report.json", "reports/judge.sarif"]
SAME_REPOSITORY = "github.event.pull_request.head.repo.full_name == github.repository"
MARKER = "<!-- oracle-judge -->"


@pytest.fixture(scope="module", params=[1, 3], ids=["one-judge", "three-shards"])
def baked(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    # Answers that reach the workflow through Jinja, away from their defaults.
    return bake(
        tmp_path_factory.mktemp("workflow"),
        base_branch="release/2.x",
        oracle_ref="oracle/ledger",
        _variance_runs=2,
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


def action(step: dict[str, Any]) -> str:
    """The action a step uses, without its pin ("" for a `run` step)."""
    return str(step.get("uses", "")).partition("@")[0]


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
    assert "{%" not in text
    assert "cookiecutter" not in text
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
        # Every job checks out, but the reporters, which must not (see below).
        assert bool(checkouts) is (name not in REPORTERS), name
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
        assert "judge-shard" not in jobs
        assert "needs" not in judge
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
    # Only the reporters can write, each one thing; the judge, which runs the patch's code,
    # and every other job read.
    for name, job in workflow["jobs"].items():
        assert job["permissions"] == REPORTERS.get(name, {"contents": "read"}), name
    # A secret only where an environment guards it.
    for name, job in workflow["jobs"].items():
        if "secrets." in yaml.safe_dump(job):
            assert "environment" in job, name


def test_the_judge_job_hands_on_the_verdict_files_whatever_it_ended_with(baked: Path) -> None:
    judge = load(baked)["jobs"]["judge"]
    handed = [s for s in judge["steps"] if s.get("with", {}).get("name") == "judge-summary"]
    assert [action(s) for s in handed] == ["actions/upload-artifact"]
    # A block or an error fails the job: the files go on all the same.
    assert handed[0]["if"] == "always()"
    assert handed[0]["with"]["path"].split() == SUMMARY_FILES


@pytest.mark.parametrize(
    ("name", "acts"),
    [
        ("code-scanning", "github/codeql-action/upload-sarif"),
        ("pr-comment", "actions/github-script"),
    ],
)
def test_the_reporters_run_nothing_of_the_repository(baked: Path, name: str, acts: str) -> None:
    """They hold a write token, so nothing the patch wrote runs in them: no checkout, no
    `run`, no local action; the judge's artifact is only read."""
    workflow = load(baked)
    job = workflow["jobs"][name]
    # After the judge whatever it ended with, on pull requests only, and never a fork's: GitHub
    # gives those a read-only token, and pull_request_target would hand the patch a write one.
    assert job["needs"] == "judge"
    assert job["if"] == f"always() && github.event_name == 'pull_request' && {SAME_REPOSITORY}"
    assert "pull_request_target" not in workflow[True]
    assert [action(s) for s in job["steps"]] == ["actions/download-artifact", acts]
    assert [s for s in job["steps"] if "run" in s] == []
    assert job["steps"][0]["with"] == {"name": "judge-summary", "path": "reports/"}


def test_the_findings_go_to_code_scanning_once_a_run(baked: Path) -> None:
    workflow = load(baked)
    sent = [
        (name, step)
        for name, step in steps(workflow)
        if action(step) == "github/codeql-action/upload-sarif"
    ]
    # Only the judgment the `judge` job ended with (the merged one when sharded) is sent, by
    # one job outside the matrix: no shard replaces another's analysis in the category.
    assert [name for name, _ in sent] == ["code-scanning"]
    assert "strategy" not in workflow["jobs"]["code-scanning"]
    step = sent[0][1]
    assert re.fullmatch(r"[0-9a-f]{40}", step["uses"].partition("@")[2])
    # The job runs whatever the judge ended with (above); the file goes whenever it exists.
    assert step["if"] == "hashFiles('reports/judge.sarif') != ''"
    assert step["with"] == {
        "sarif_file": "reports/judge.sarif",
        "category": "oracle-judge",
        # The findings are on the head's lines: the judge's subject, not the merge commit.
        "ref": "refs/pull/${{ github.event.pull_request.number }}/head",
        "sha": "${{ github.event.pull_request.head.sha }}",
    }


def comment_script(workflow: dict[Any, Any]) -> dict[str, Any]:
    post = workflow["jobs"]["pr-comment"]["steps"][1]
    assert isinstance(post, dict)
    return post


def test_the_comment_reads_the_summary_as_data(baked: Path) -> None:
    post = comment_script(load(baked))
    script = post["with"]["script"]
    # Even with no artifact it posts, to say so.
    assert post["if"] == "always()"
    # The summary is text the patch's output shaped: the script reads it from the file, and no
    # expression is expanded into the script. The one value from the workflow, the judge's
    # result, comes through the environment. The token is the job's own.
    assert "${{" not in script
    assert post["env"] == {"RESULT": "${{ needs.judge.result }}"}
    assert set(post["with"]) == {"script"}
    assert "readFileSync('reports/judge-summary.md'" in script
    assert MARKER in script
    assert "updateComment" in script
    assert "createComment" in script


# Runs the comment's script as actions/github-script does (an async function given `require`,
# `github` and `context`), with a recording `github`; prints the calls after the listing.
GITHUB_SCRIPT = r"""
const fs = require('fs');
const [script, comments] = [fs.readFileSync(process.argv[1], 'utf8'), JSON.parse(process.argv[2])];
const calls = [];
const record = (kind) => async (args) => { calls.push([kind, args]); };
const github = {
  paginate: async () => comments,
  rest: {
    issues: {listComments: null, updateComment: record('update'), createComment: record('create')},
  },
};
const context = {
  repo: {owner: 'o', repo: 'r'}, serverUrl: 'https://github.com', runId: 7,
  payload: {pull_request: {number: 5}},
};
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
new AsyncFunction('require', 'github', 'context', script)(require, github, context)
  .then(() => console.log(JSON.stringify(calls)));
"""


def test_the_comment_is_one_comment_updated_in_place(baked: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.js"
    script.write_text(comment_script(load(baked))["with"]["script"], "utf-8")

    def post(comments: list[dict[str, Any]]) -> list[Any]:
        proc = subprocess.run(
            ["node", "-e", GITHUB_SCRIPT, str(script), json.dumps(comments)],
            cwd=tmp_path,
            env={"PATH": str(Path(str(shutil.which("node"))).parent), "RESULT": "failure"},
            capture_output=True,
            text=True,
            check=True,
        )
        calls = json.loads(proc.stdout)
        assert isinstance(calls, list)
        return calls

    (tmp_path / "reports").mkdir()
    summary = "## Oracle judge: **block** (exit 1)\n\n| Step | Status |\n`${{ github.token }}`\n"
    (tmp_path / "reports" / "judge-summary.md").write_text(summary, "utf-8")
    [(kind, args)] = post([])
    assert (kind, args["issue_number"]) == ("create", 5)
    # The marker first, the check's own result, then the summary as it was written.
    assert args["body"].startswith(f"{MARKER}\n")
    assert "**failure**" in args["body"]
    assert args["body"].endswith(summary)
    # Its own comment is updated; one that anyone else wrote with the marker is left alone.
    theirs = {"id": 1, "user": {"login": "someone"}, "body": f"{MARKER} judge: merge"}
    ours = {"id": 2, "user": {"login": "github-actions[bot]"}, "body": f"{MARKER}\nold"}
    [(kind, args)] = post([theirs, ours])
    assert (kind, args["comment_id"]) == ("update", 2)
    assert args["body"].endswith(summary)
    [(kind, args)] = post([theirs])
    assert kind == "create"
    # A judgment that stopped before its reports still gets its comment, saying so.
    (tmp_path / "reports" / "judge-summary.md").unlink()
    [(kind, args)] = post([ours])
    assert kind == "update"
    assert "left no summary" in args["body"]


def test_concurrency_is_set_without_cancel_in_progress(baked: Path) -> None:
    workflow = load(baked)
    # Per pull request and per copy of the file: a ruleset's run of the base branch's copy
    # must not be the pending run that the pull request's own copy replaces.
    group = workflow["concurrency"]["group"]
    assert "github.workflow_ref" in group
    assert "github.event.pull_request.number" in group
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
    assert judging
    assert [name for name, _ in apt] == judging
    assert {run for _, run in apt} == {
        "sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends faketime"
    }


def test_ci_pins_hash_every_package_of_nox_and_uv(baked: Path) -> None:
    text = (baked / CI_PINS).read_text("utf-8")
    pinned = pins(text)
    # One entry per requirement: its line and the continuation lines that carry its hashes.
    entries = re.split(r"\n(?=[A-Za-z0-9])", text)
    requirements = [e for e in entries if not e.startswith("#")]
    assert requirements
    assert all(PIN_LINE.match(e) and HASH.search(e) for e in requirements)
    # The same nox and uv as the template's own sessions.
    dev = pins((TEMPLATE / "requirements-dev.txt").read_text("utf-8"))
    assert pinned["nox"] == dev["nox"]
    assert pinned["uv"] == dev["uv"]
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
