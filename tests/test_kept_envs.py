"""The cache of kept environments and runs stays bounded (scripts/_gate/runs/kept_envs.py and
reuse.py, issue 28).

Every judgment keeps its patch's environment for the judgment whose base it becomes, so the
cache gains one per judged head: it holds the $ORACLE_CACHE_ENVS most recently used, each
judgment deleting the others as its builds start (never its own), and never one that a
judgment, in this process or another, is using. Real virtual environments (without pip: what
is kept does not matter here), real locks, a real second process. The runs kept beside them
are bounded alike ($ORACLE_CACHE_RUNS): one deleted is run again by the judgment that looks
for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import venv
from contextlib import ExitStack
from pathlib import Path

import pytest
from _gate.core.protocol import FailClosed
from _gate.runs.kept_envs import (
    BUILT,
    KEPT,
    LIMIT_DEFAULT,
    LIMIT_ENV,
    Cache,
    env_limit,
    evict,
    kept_env,
)
from _gate.runs.reuse import CACHE_ENV, cache_folder, keep, kept, prune

from tests.helpers import SCRIPTS

pytestmark = pytest.mark.fast


def build(dest: Path) -> Path:
    venv.create(dest, with_pip=False)
    return dest / "bin" / "python"


def use(cache: Path, key: str, limit: int, held: ExitStack | None = None) -> str:
    """One judgment's use of the environment `key`, as the judge makes it: room first (its own
    key spared), then the environment; how it came. With `held`, the judgment is still
    running when this returns (its environment in use); else it has ended."""
    with ExitStack() as ended:
        kept_in = Cache(cache, limit, held if held is not None else ended)
        evict(kept_in, [key])
        return kept_env(kept_in, key, cache / "fresh" / key, build).came


def present(cache: Path) -> set[str]:
    """The keys of the environments kept, and of the lock files left."""
    return {path.name for path in (cache / "envs").iterdir()}


def test_the_cache_holds_the_most_recently_used_environments_and_deletes_the_rest(
    tmp_path: Path,
) -> None:
    assert [use(tmp_path, key, 2) for key in ("a" * 16, "b" * 16)] == [BUILT, BUILT]
    assert use(tmp_path, "a" * 16, 2) == KEPT  # a is now more recent than b
    assert use(tmp_path, "c" * 16, 2) == BUILT
    assert present(tmp_path) == {"a" * 16, "a" * 16 + ".lock", "c" * 16, "c" * 16 + ".lock"}
    assert use(tmp_path, "b" * 16, 2) == BUILT  # deleted: built again, and a is the oldest
    assert present(tmp_path) == {"b" * 16, "b" * 16 + ".lock", "c" * 16, "c" * 16 + ".lock"}


def test_an_environment_in_use_is_never_deleted_and_goes_once_its_judgment_ends(
    tmp_path: Path,
) -> None:
    with ExitStack() as running:
        assert use(tmp_path, "a" * 16, 0, running) == BUILT
        # Limit 0: each judgment deletes every other environment no judgment uses.
        assert use(tmp_path, "b" * 16, 0) == BUILT
        assert use(tmp_path, "c" * 16, 0) == BUILT
        assert present(tmp_path) == {"a" * 16, "a" * 16 + ".lock", "c" * 16, "c" * 16 + ".lock"}
    use(tmp_path, "d" * 16, 0)
    assert present(tmp_path) == {"d" * 16, "d" * 16 + ".lock"}


def test_an_environment_another_process_uses_is_never_deleted(tmp_path: Path) -> None:
    assert use(tmp_path, "a" * 16, 8) == BUILT
    holder = (
        "import sys, time\n"
        "from contextlib import ExitStack\n"
        "from pathlib import Path\n"
        "from _gate.runs.kept_envs import Cache, kept_env\n"
        "with ExitStack() as held:\n"
        "    cache = Cache(Path(sys.argv[1]), 8, held)\n"
        "    came = kept_env(cache, 'a' * 16, cache.folder / 'x', lambda dest: dest)\n"
        "    print(came.came, flush=True)\n"
        "    sys.stdin.read()\n"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", holder, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(SCRIPTS)},
    )
    try:
        assert other.stdout is not None
        assert other.stdout.readline().strip() == KEPT
        use(tmp_path, "b" * 16, 0)
        assert "a" * 16 in present(tmp_path)
    finally:
        other.communicate("")
    assert other.returncode == 0
    use(tmp_path, "c" * 16, 0)
    assert "a" * 16 not in present(tmp_path)


def test_making_room_spares_the_judgments_own_environments_and_counts_them(
    tmp_path: Path,
) -> None:
    keys = [letter * 16 for letter in "abcd"]
    for key in keys:  # a used first, d last
        use(tmp_path, key, 8)
    locks = {f"{key}.lock" for key in keys}
    with ExitStack() as held:
        # A judgment of the oracle a, base b and head c: its three count towards the limit.
        evict(Cache(tmp_path, 4, held), keys[:3])
        assert present(tmp_path) == {*keys, *locks}
        evict(Cache(tmp_path, 3, held), keys[:3])
        assert present(tmp_path) == {*keys[:3], *locks - {"d" * 16 + ".lock"}}
        # Its own stay past the limit: they are the judgment's to keep or to build.
        evict(Cache(tmp_path, 0, held), keys[1:3])
        assert present(tmp_path) == {"b" * 16, "c" * 16, "b" * 16 + ".lock", "c" * 16 + ".lock"}
    evict(Cache(tmp_path / "empty", 8, ExitStack()), keys)  # no cache yet: nothing to delete


@pytest.mark.parametrize("text", ["eight", "-1", "2.5"])
def test_a_limit_that_is_no_whole_number_fails_closed_naming_the_variable(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LIMIT_ENV, text)
    with pytest.raises(FailClosed, match=rf"^\${LIMIT_ENV}='{text}': not a whole number;"):
        env_limit()
    monkeypatch.setenv(LIMIT_ENV, "3")
    assert env_limit() == 3
    monkeypatch.delenv(LIMIT_ENV)
    assert env_limit() == LIMIT_DEFAULT


def test_the_cache_holds_the_most_recently_used_runs_and_deletes_the_rest(tmp_path: Path) -> None:
    keys = [letter * 64 for letter in "abcde"]
    for age, key in zip(range(5, 0, -1), keys, strict=True):  # kept in turn: a first, e last
        keep(tmp_path, key, {"outcomes": {key: "passed"}})
        then = time.time_ns() - age * 10**9
        os.utime(tmp_path / f"{key}.json", ns=(then, then))
    assert kept(tmp_path, keys[0]) == {"outcomes": {keys[0]: "passed"}}  # a, read: used now
    prune(tmp_path, 3)
    assert sorted(path.stem for path in tmp_path.glob("*.json")) == [keys[0], keys[3], keys[4]]
    assert kept(tmp_path, keys[1]) is None  # deleted: the judgment that wants it runs it again
    prune(tmp_path / "absent", 3)  # no folder yet: nothing kept, nothing to delete


def test_a_relative_cache_folder_is_the_working_directorys_wherever_its_jobs_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ORACLE_CACHE=cache nox -s judge`: the kept environments are run from other folders
    (the worktrees, the jobs' scratch), where a relative path names nothing."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(CACHE_ENV, "cache")
    folder = cache_folder(tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "..")
    assert folder == tmp_path / "cache"
    assert folder.is_absolute()
    monkeypatch.delenv(CACHE_ENV)
    assert cache_folder(Path("repo")) == tmp_path.parent / "repo" / ".oracle" / "cache"
