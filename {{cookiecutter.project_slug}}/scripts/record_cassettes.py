"""Record the parent's public surface: run every case of oracle/cases.yaml on the merge-base build.

The step: _gate/steps/record.py.

`python scripts/record_cassettes.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.record import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
