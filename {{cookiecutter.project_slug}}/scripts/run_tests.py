"""Renamed: scripts/advisory_tests.py. Works until the next schema_version."""

import sys

from advisory_tests import main

if __name__ == "__main__":
    print("scripts/run_tests.py is now scripts/advisory_tests.py", file=sys.stderr)
    sys.exit(main())
