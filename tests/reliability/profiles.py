"""The hypothesis profiles of the reliability suites: ``ci`` (default) and ``chaos``.

``ci`` is derandomized and small enough for ``make test``; ``chaos`` (``make chaos``, or
``HYPOTHESIS_PROFILE=chaos``) draws many more cases with fresh randomness. The profile
is loaded when this module is imported (conftest.py imports it first).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

# Replays run in virtual time but their wall time varies with the job's size: no
# per-example deadline, and large generated jobs are the point, not a health problem.
_BASE = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile("ci", _BASE, derandomize=True, database=None, max_examples=60)
# The long run keeps its failing examples (to replay them) where git does not look.
_FOUND = Path(__file__).resolve().parents[2] / ".pytest_cache" / "hypothesis"
settings.register_profile(
    "chaos", _BASE, max_examples=2000, database=DirectoryBasedExampleDatabase(str(_FOUND))
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def scaled(factor: float) -> settings:
    """The current profile with ``factor`` times its examples (cheap tests get more)."""
    current = settings.get_profile(settings.get_current_profile_name())
    return settings(current, max_examples=max(1, int(current.max_examples * factor)))
