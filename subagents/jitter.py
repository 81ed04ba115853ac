"""The jitter streams of subagents: ``random.Random(seed)``, made only when first drawn."""

from __future__ import annotations

import random
from typing import Any, Protocol


class Jitter(Protocol):
    """What fanout draws waits from and checkpoints: a ``random.Random`` fits."""

    def uniform(self, a: float, b: float) -> float:
        """A float in [a, b]."""
        ...

    def getstate(self) -> tuple[Any, ...]:
        """The stream's state, to checkpoint."""
        ...

    def setstate(self, state: tuple[Any, ...]) -> None:
        """Continue from a checkpointed state."""
        ...


class DeferredRandom:
    """``random.Random(x)``, made when first used: the same stream, drawn or saved.

    A ``random.Random`` carries its Mersenne Twister state inline (2.5 KB) whether it is
    seeded or not, and seeding from a string hashes it with SHA-512; most subagents
    never wait with jitter, so a fan-out paid both for nothing (at full fan-out, every
    subagent alive at once, the stream was an eighth of a subagent's memory).
    """

    __slots__ = ("_rng", "_seed")

    def __init__(self, x: object = None) -> None:
        self._seed = x
        self._rng: random.Random | None = None

    def _real(self) -> random.Random:
        rng = self._rng
        if rng is None:
            rng = self._rng = random.Random(self._seed)  # type: ignore[arg-type]  # as given
        return rng

    def uniform(self, a: float, b: float) -> float:
        """``random.Random(x).uniform``, in the stream's order."""
        return self._real().uniform(a, b)

    def random(self) -> float:
        """The next float in [0, 1)."""
        return self._real().random()

    def getstate(self) -> tuple[Any, ...]:
        """The generator's state (seeding it first if still pending)."""
        return self._real().getstate()

    def setstate(self, state: tuple[Any, ...]) -> None:
        """Continue from ``state``; any pending seed is dropped."""
        rng = random.Random(0)
        rng.setstate(state)
        self._rng = rng

    def seed(self, a: Any = None, version: int = 2) -> None:
        """Seed now, as ``random.Random.seed`` does; the pending seed is dropped."""
        self._rng = random.Random()
        self._rng.seed(a, version)

    def __getattr__(self, name: str) -> Any:
        # Everything else random.Random offers (getrandbits, randrange, choice, ...),
        # on the real stream.
        if name.startswith("__") or name in DeferredRandom.__slots__:
            raise AttributeError(name)
        return getattr(self._real(), name)
