"""Run the property oracles of the base tree against the parent build and the patch build.

The step: _gate/steps/oracle.py.

`python scripts/oracle.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.oracle import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
