"""Renamed: scripts/fixtures_lock.py. Works until the next schema_version."""

import sys

from fixtures_lock import main

if __name__ == "__main__":
    print("scripts/lock_fixtures.py is now scripts/fixtures_lock.py", file=sys.stderr)
    sys.exit(main())
