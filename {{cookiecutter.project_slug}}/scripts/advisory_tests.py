"""Run the patch's own tests (`tests:` of judge.yaml), advisory: never part of the verdict.

The step: _gate/steps/tests.py.

`python scripts/advisory_tests.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.tests import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
