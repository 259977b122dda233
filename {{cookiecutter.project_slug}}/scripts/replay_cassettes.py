"""Replay the parent cassettes three ways: recorded parent, parent build now, patch build.

The step: _gate/steps/replay.py.

`python scripts/replay_cassettes.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.replay import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
