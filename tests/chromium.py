"""Finding Debian's chromium for the browser tests: run wherever it can be installed.

``make test`` installs it first (``.ci/chromium``) where that is possible: as root (or
with passwordless sudo) with apt-get. So a missing chromium fails the test there, and
in CI; it is skipped only on a machine where it cannot be installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def installable() -> bool:
    """True where `.ci/chromium` could install it: apt-get, and root or passwordless sudo."""
    if shutil.which("apt-get") is None:
        return False
    if os.geteuid() == 0:
        return True
    if shutil.which("sudo") is None:
        return False
    probe = subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False)
    return probe.returncode == 0


def chromium() -> str:
    """The chromium binary; a failure where it could be installed, a skip elsewhere."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found is not None:
        return found
    if os.environ.get("CI") or installable():
        pytest.fail("chromium is missing on a machine that can install it: `make test` "
                    "does (.ci/chromium), or apt-get install -y chromium")
    pytest.skip("chromium is not installed and cannot be here (no apt-get, no root): "
                "the browser tests are skipped")
