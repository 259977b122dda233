"""Where the oracle's subject worker runs (subject.py): the gate's own scene, or a perturbed
run's (docs/perturbation.md), which the oracle step writes to a file for the subject plugin.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class WorkerScene:
    """Where the worker runs: its environment, working directory, the folders it may write,
    and whether Python starts isolated (the gate's own run) or as a user starts it."""

    env: dict[str, str]
    cwd: str | None
    writable: tuple[str, ...]
    isolated: bool

    @classmethod
    def own(cls, scratch: str) -> WorkerScene:
        """The gate's own: pytest's environment, HOME and TMPDIR a fresh scratch folder."""
        env = {**os.environ, "HOME": scratch, "TMPDIR": scratch}
        return cls(env, None, (scratch,), True)

    @classmethod
    def read(cls, path: Path) -> WorkerScene:
        """A perturbed run's scene, as the oracle step wrote it (--subject-scene)."""
        data = json.loads(path.read_text("utf-8"))
        return cls(dict(data["env"]), data["cwd"], tuple(data["writable"]), data["isolated"])

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)), "utf-8")
