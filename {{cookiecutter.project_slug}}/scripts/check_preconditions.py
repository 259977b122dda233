"""Renamed: scripts/preconditions.py. Works until the next schema_version."""

import sys

from preconditions import main

if __name__ == "__main__":
    print("scripts/check_preconditions.py is now scripts/preconditions.py", file=sys.stderr)
    sys.exit(main())
