"""Lock the bytes of every file under fixtures/ by SHA-256, or verify a tree against a lock.

The step: _gate/steps/fixtures_lock.py.

`python scripts/fixtures_lock.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.fixtures_lock import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
