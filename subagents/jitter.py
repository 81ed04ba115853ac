"""The jitter streams of subagents: ``random.Random(seed)``, seeded only when first drawn."""

from __future__ import annotations

import random
from typing import Any

_SEEDED = object()


class DeferredRandom(random.Random):
    """``random.Random(x)``, seeded when first used: the same stream, drawn or saved.

    Seeding from a string hashes it with SHA-512 and initialises the Mersenne Twister;
    most subagents never wait with jitter, so a fan-out paid that for nothing.
    """

    _pending: object

    def __init__(self, x: object = None) -> None:
        # random.Random.__init__ would seed now; record the seed instead.
        self._pending = x
        self.gauss_next = None

    def _seed_now(self) -> None:
        pending = self._pending
        if pending is not _SEEDED:
            self._pending = _SEEDED
            super().seed(pending)  # type: ignore[arg-type]  # what Random(x) was given

    def seed(self, a: Any = None, version: int = 2) -> None:
        """Seed now, as random.Random.seed does."""
        self._pending = _SEEDED
        super().seed(a, version)

    def random(self) -> float:
        """The next float in [0, 1), seeding first if still pending."""
        self._seed_now()
        return super().random()

    def getrandbits(self, k: int, /) -> int:
        """``k`` random bits, seeding first if still pending."""
        self._seed_now()
        return super().getrandbits(k)

    def getstate(self) -> tuple[Any, ...]:
        """The generator's state, seeding first if still pending."""
        self._seed_now()
        return super().getstate()

    def setstate(self, state: tuple[Any, ...]) -> None:
        """Restore a state; any pending seed is dropped."""
        self._pending = _SEEDED
        super().setstate(state)
