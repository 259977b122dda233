"""Flake budget, the last step: the only place an oracle or crossrun failure can be excused.

The step: _gate/steps/flake_budget.py.

`python scripts/flake_budget.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.flake_budget import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
