"""Preconditions of a judgment: offline, no model endpoint, the decision table, some oracle.

The step: _gate/steps/preconditions.py.

`python scripts/preconditions.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.preconditions import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
