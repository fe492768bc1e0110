"""Write requirements/ci.lock from a frozen environment (scripts/try-newest --write-lock), atomically.

Usage: python scripts/write_lock.py FROZEN LOCK TORCH_SPEC
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import tempfile
from pathlib import Path

HEADER = """\
# The versions the test command installs (scripts/check: pip -c requirements/ci.lock), so that a fresh machine gets
# what CI got. Written by scripts/try-newest --write-lock on {date} after the whole test command passed on them
# (CPython {python}, {machine}, {torch}). Move these pins by running that script and committing the result.
"""


def main(frozen_path: str, lock_path: str, torch_spec: str) -> None:
    lines = Path(frozen_path).read_text(encoding="utf-8").splitlines()
    pins = sorted((line.strip() for line in lines if "==" in line and not line.startswith("#")), key=str.lower)
    header = HEADER.format(date=datetime.date.today().isoformat(), python=platform.python_version(),
                           machine=f"{platform.system()} {platform.machine()}", torch=torch_spec)
    target = Path(lock_path)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".ci.lock.")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(header + "\n".join(pins) + "\n")
    os.replace(temporary, target)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python scripts/write_lock.py FROZEN LOCK TORCH_SPEC")
    main(*sys.argv[1:])
