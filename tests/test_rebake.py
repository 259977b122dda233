"""Baking again over a repository: `cookiecutter --replay -f` only adds files, and cruft takes a
later template commit into a bake while keeping the user's commits."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noxfile import VARIANTS
from tools.bakery import TEMPLATE, edit, git

# The user's own files at paths a bake writes or drops, committed: the README and the CLI are
# the template's, oracle/test_properties.py is the example's (dropped by include_example=no),
# and .github/ holds the template's workflow beside the user's (dropped by ci=none).
COMMITTED = {
    "README.md": "# Our README\n",
    "src/shop/cli.py": '"""Our CLI."""\n',
    "oracle/test_properties.py": '"""Our property oracles."""\n',
    "fixtures.lock": "{}\n",
    ".github/workflows/other.yml": "name: ours\n",
}


def cookiecutter_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The cookiecutter CLI with its replay folder in `home`: tests in parallel share none."""
    config = home / "cookiecutter.yaml"
    config.write_text(f"replay_dir: {home / 'replay'}\ncookiecutters_dir: {home / 'cc'}\n")
    cmd = [sys.executable, "-m", "cookiecutter", "--config-file", str(config)]
    cmd += ["-o", str(home / "out"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def files(repo: Path) -> dict[str, bytes]:
    """Every file of the working tree and its bytes, git's own folder left out."""
    paths = (p for p in repo.rglob("*") if p.is_file() and ".git" not in p.relative_to(repo).parts)
    return {p.relative_to(repo).as_posix(): p.read_bytes() for p in paths}


def status_lines(repo: Path) -> list[str]:
    """`git status --porcelain`, each line whole (the branch line first: no space stripped)."""
    return git(repo, "status", "--porcelain", "--branch").splitlines()


def leave_user_work(repo: Path, ignored: bool = True) -> list[str]:
    """Commit COMMITTED, then leave work that is not in HEAD: a tracked file edited, an untracked
    (and an ignored) file where the template writes, a tracked file deleted. Returns the paths a
    re-bake changes and must put back (or remove again, for the deleted file)."""
    for rel, text in COMMITTED.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
        git(repo, "add", rel)
    # Out of the index, so that they are left untracked (and ignored) below.
    git(repo, "rm", "-q", "--cached", "--ignore-unmatch", "oracle/test_replay_corpus.py")
    if ignored:
        git(repo, "rm", "-q", "--cached", "oracles/MATRIX.md")
        (repo / ".git/info/exclude").write_text("/oracles/MATRIX.md\n")
    git(repo, "commit", "-q", "--no-verify", "-m", "our work")
    with (repo / "Makefile").open("a") as makefile:
        makefile.write("# our uncommitted target\n")
    (repo / "oracle/test_replay_corpus.py").write_text('"""Untracked, ours."""\n')
    if ignored:
        (repo / "oracles/MATRIX.md").write_text("Ignored notes, ours.\n")
        assert git(repo, "check-ignore", "oracles/MATRIX.md") == "oracles/MATRIX.md"
    (repo / "CODEOWNERS").unlink()
    changed = [rel for rel in COMMITTED if not rel.startswith(".github/")]
    left = ["Makefile", "oracle/test_replay_corpus.py", "CODEOWNERS"]
    return sorted([*changed, *left, *(["oracles/MATRIX.md"] if ignored else [])])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_replay_over_the_repository_keeps_every_user_file(tmp_path: Path, variant: str) -> None:
    answers = [f"{name}={value}" for name, value in VARIANTS[variant].items()]
    first = cookiecutter_cli(tmp_path, "--no-input", str(TEMPLATE), *answers)
    assert first.returncode == 0, first.stdout + first.stderr
    repo = tmp_path / "out" / "shop"
    put_back = leave_user_work(repo)
    before, status, refs = files(repo), status_lines(repo), git(repo, "show-ref")

    again = cookiecutter_cli(tmp_path, "--replay", "-f", str(TEMPLATE))

    assert again.returncode == 0, again.stdout + again.stderr
    after = files(repo)
    assert {rel: after.get(rel) for rel in before} == before
    assert "CODEOWNERS" not in after  # the user's uncommitted deletion stands
    assert status_lines(repo) == status
    assert git(repo, "show-ref") == refs
    assert not (repo / ".git" / "oracle-template").exists()
    line = f"put back yours it changed or removed ({', '.join(put_back)}); take template changes"
    assert line in again.stdout, again.stdout


def template_repository(dest: Path) -> Path:
    """A git repository of the template as it is on disk (tracked and new files, not ignored)."""
    listed = git(TEMPLATE, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for rel in filter(None, listed.split("\0")):
        if (TEMPLATE / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(TEMPLATE / rel, dest / rel)
    git(dest, "init", "-q")
    git(dest, "add", "--all")
    git(dest, "commit", "-q", "--no-verify", "-m", "template")
    return dest


def cruft(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cruft", *args]
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=False)


def test_cruft_update_brings_a_template_change_and_keeps_user_work(tmp_path: Path) -> None:
    template = template_repository(tmp_path / "template")
    create = cruft(tmp_path, "create", "--no-input", "--output-dir", "out", str(template))
    assert create.returncode == 0, create.stdout + create.stderr
    repo = tmp_path / "out" / "shop"
    assert git(repo, "status", "--porcelain") == "?? .cruft.json"
    # The step the README gives after `cruft create`.
    git(repo, "add", ".cruft.json")
    git(repo, "commit", "-q", "--no-verify", "-m", "Track the template with cruft")
    unchanged = cruft(repo, "diff", "--exit-code")
    assert (unchanged.returncode, unchanged.stdout) == (0, ""), unchanged.stdout[:2000]

    readme = "{{cookiecutter.project_slug}}/README.md"
    edit(template / readme, "## Run the judge safely\n", "## Run the judge safely, as of now\n")
    git(template, "commit", "-q", "--no-verify", "-am", "template: README heading")
    edit(repo / "README.md", "# Shop\n", "# Shop, our fork\n")
    (repo / "NOTES.md").write_text("Our notes.\n")
    git(repo, "add", "--all")
    git(repo, "commit", "-q", "--no-verify", "-m", "our work")

    update = cruft(repo, "update", "-y")

    assert update.returncode == 0, update.stdout + update.stderr
    text = (repo / "README.md").read_text()
    assert text.startswith("# Shop, our fork\n")
    assert "\n## Run the judge safely, as of now\n" in text
    assert (repo / "NOTES.md").read_text() == "Our notes.\n"
    assert git(repo, "diff", "--name-only", "HEAD").splitlines() == [".cruft.json", "README.md"]
    assert git(repo, "ls-files", "--others") == ""  # no .rej file, nothing of a bake's .git
    state = json.loads((repo / ".cruft.json").read_text())
    assert state["commit"] == git(template, "rev-parse", "HEAD")


def test_cruft_create_over_the_repository_keeps_every_file_git_sees(tmp_path: Path) -> None:
    """cruft names no template folder to the hooks, so the pre-gen hook saves every file git
    sees (an ignored file where the template writes is the one it cannot know of)."""
    template = template_repository(tmp_path / "template")
    create = ("create", "--no-input", "--output-dir", "out", str(template))
    assert cruft(tmp_path, *create).returncode == 0
    repo = tmp_path / "out" / "shop"
    (repo / ".cruft.json").unlink()
    put_back = leave_user_work(repo, ignored=False)
    before, status = files(repo), status_lines(repo)

    again = cruft(tmp_path, *create, "--overwrite-if-exists")

    assert again.returncode == 0, again.stdout + again.stderr
    after = files(repo)
    assert {rel: after.get(rel) for rel in before} == before
    assert "CODEOWNERS" not in after
    assert sorted(status_lines(repo)) == sorted([*status, "?? .cruft.json"])
    assert f"put back yours it changed or removed ({', '.join(put_back)})" in again.stdout
