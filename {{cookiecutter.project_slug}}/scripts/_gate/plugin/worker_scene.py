"""Where the oracle's subject worker runs (subject.py): the gate's own scene, or a perturbed
run's (docs/perturbation.md), which the oracle step writes to a file for the subject plugin.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from _gate.plugin.patch_env import gate_env


@dataclass(frozen=True)
class WorkerScene:
    """Where the worker runs: its environment, working directory, the folders it may write,
    and whether Python starts isolated (the gate's own run) or as a user starts it."""

    env: dict[str, str]
    cwd: str | None
    writable: tuple[str, ...]
    isolated: bool

    @classmethod
    def own(cls, scratch: str, bin_dir: Path) -> WorkerScene:
        """The gate's own (_gate/plugin/patch_env.py): HOME and TMPDIR a fresh scratch folder, the
        build's scripts folder `bin_dir` first on PATH."""
        return cls(gate_env(Path(scratch), Path(scratch), bin_dir), None, (scratch,), True)

    @classmethod
    def read(cls, path: Path) -> WorkerScene:
        """A perturbed run's scene, as the oracle step wrote it (--subject-scene)."""
        data = json.loads(path.read_text("utf-8"))
        return cls(dict(data["env"]), data["cwd"], tuple(data["writable"]), data["isolated"])

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)), "utf-8")
