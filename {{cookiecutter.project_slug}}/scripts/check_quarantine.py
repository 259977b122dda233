"""Check the flake quarantine read from the protected oracle ref (never from the patch).

The step: _gate/steps/quarantine.py.

`python scripts/check_quarantine.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.quarantine import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
