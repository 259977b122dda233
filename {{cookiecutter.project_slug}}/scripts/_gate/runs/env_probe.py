"""What a build's environment provides, asked of its own interpreter (confined: it runs the
build's .pth files): the tests' dependencies it lacks, the pytest plugins they declare, and
which of a tree's top-level modules it installs, so a run that imported the tree's sources
instead of the build is named."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _gate.core.protocol import FailClosed
from _gate.plugin.patch_env import gate_env
from _gate.runs.pytest_run import PytestRun
from _gate.runs.sandbox import run_confined
from _gate.runs.test_deps import test_requirements

# Run in a build's environment (isolated: no tree on sys.path): which of the distributions
# named before `--` are missing, the pytest plugins they declare, and which of the module names
# after `--` the environment installs (in site-packages: not the standard library's).
PROBE = """
import importlib.metadata as m, importlib.util as u, json, os, sys, sysconfig
cut = sys.argv.index("--")
installed = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
missing, plugins, provided = [], [], []
for name in sys.argv[1:cut]:
    try:
        dist = m.distribution(name)
    except m.PackageNotFoundError:
        missing.append(name)
        continue
    plugins += [ep.value.split(":")[0] for ep in dist.entry_points if ep.group == "pytest11"]
for module in sys.argv[cut + 1:]:
    try:
        spec = u.find_spec(module)
    except (ImportError, ValueError):
        continue
    where = spec and (spec.origin or next(iter(spec.submodule_search_locations or ()), None))
    if where and any(os.path.realpath(where).startswith(d + os.sep) for d in installed):
        provided.append(module)
print(json.dumps({"missing": missing, "plugins": plugins, "provided": provided}))
"""


PROBE_TIMEOUT = 120.0  # seconds for the environment probe: one interpreter start


@dataclass(frozen=True)
class Environment:
    """What a build's environment holds for the crossrun."""

    missing: tuple[str, ...]  # test dependencies not installed
    plugins: tuple[str, ...]  # pytest plugins the test dependencies declare, loaded by -p
    provided: frozenset[str]  # of the modules asked about, those the environment can import


def probe(python: Path, names: Sequence[str], modules: Sequence[str]) -> Environment:
    """What the build's environment holds; its python runs the build's .pth files, so the
    probe is confined like the rest of the patch's code."""
    with tempfile.TemporaryDirectory(prefix="probe-") as tmp:
        done = run_confined(
            [str(python), "-I", "-c", PROBE, *names, "--", *modules],
            writable=[Path(tmp)],
            timeout=PROBE_TIMEOUT,
            cwd=python.parent,
            env=gate_env(Path(tmp), Path(tmp), python.parent),
        )
    try:
        data = json.loads(done.stdout.head)
    except ValueError:
        raise FailClosed(
            f"{python}: the environment probe failed: {done.stderr.tail(200)!r}"
        ) from None
    return Environment(tuple(data["missing"]), tuple(data["plugins"]), frozenset(data["provided"]))


def own_modules(tree: Path) -> list[str]:
    """Top-level modules of the tree a build could provide: packages and modules at the root
    (flat layout) and under `src/`."""
    found = []
    for folder in (tree, tree / "src"):
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if entry.suffix == ".py" and entry.name != "conftest.py" and entry.is_file():
                found.append(entry.stem)
            elif (entry / "__init__.py").is_file():
                found.append(entry.name)
    return sorted(set(found))


def shadowing(python: Path, result: PytestRun, folders: Sequence[str]) -> list[str]:
    """Modules the run imported from the base tree that the build provides too: the run tested
    the tree's sources, not the build. Test folders and conftest.py files are the tree's own."""
    own = tuple(f"{f.rstrip('/')}/" for f in folders)
    tops = {
        name.split(".", 1)[0]: path
        for name, path in result.sources.items()
        if not path.startswith(own) and path not in folders and Path(path).name != "conftest.py"
    }
    provided = probe(python, [], sorted(tops)).provided if tops else frozenset()
    return sorted(f"{name} ({tops[name]})" for name in provided)


def environments(
    tree: Path, test_extra: str, pythons: dict[str, Path], candidates: Sequence[str]
) -> dict[str, Environment]:
    """One probe per build: the tests' own dependencies (each must be installed) and which of
    the tree's top-level modules the build installs."""
    needed = test_requirements(tree, test_extra)
    found = {side: probe(python, needed, candidates) for side, python in pythons.items()}
    for side, env in found.items():
        if env.missing:
            raise FailClosed(
                f"test dependency {env.missing[0]} (judge.yaml test_extra {test_extra!r}) "
                f"is not in the {side} build's environment: add it, hash-pinned, to "
                "scripts/requirements-judge.txt"
            )
    return found
