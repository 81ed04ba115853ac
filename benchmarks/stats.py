"""Repeated measurements and their summary: min, median and max, never a lone number."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio


@dataclass(frozen=True, slots=True)
class Stats:
    """A figure measured several times: its min, median and max, in ``unit``."""

    min: float
    median: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        """The summary of ``values`` (at least one)."""
        if not values:
            raise ValueError("a figure needs at least one measurement")
        return cls(min(values), statistics.median(values), max(values), len(values))

    def scaled(self, factor: float) -> Stats:
        """The same figure in another unit (every value times ``factor``)."""
        return Stats(self.min * factor, self.median * factor, self.max * factor, self.n)

    def to_json(self) -> dict[str, float]:
        """min/median/max/n, rounded to what a timer can tell apart."""
        return {
            "min": _round(self.min),
            "median": _round(self.median),
            "max": _round(self.max),
            "n": self.n,
        }


def _round(value: float) -> float:
    return float(f"{value:.6g}")


@dataclass(frozen=True, slots=True)
class Target:
    """What a figure must reach: ``median`` compared with ``limit``."""

    text: str
    value: float
    limit: float
    higher_is_better: bool = False
    strict: bool = False

    @property
    def met(self) -> bool:
        """True when the figure's median meets the target."""
        if self.higher_is_better:
            return self.value > self.limit if self.strict else self.value >= self.limit
        return self.value < self.limit if self.strict else self.value <= self.limit

    def to_json(self) -> dict[str, Any]:
        """The target, the figure it judged and the verdict."""
        return {"target": self.text, "value": _round(self.value), "limit": self.limit,
                "met": self.met, "higher_is_better": self.higher_is_better,
                "strict": self.strict}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Target:
        """The target :meth:`to_json` wrote."""
        return cls(str(data["target"]), float(data["value"]), float(data["limit"]),
                   bool(data.get("higher_is_better", False)), bool(data.get("strict", False)))


@dataclass(frozen=True, slots=True)
class Figure:
    """One row of the results: a labelled measurement, its unit, and a target if any.

    ``baseline`` is the same figure's median in the baseline tree's run, matched
    by benchmark key and label; the harness fills it in, a benchmark leaves it alone.
    """

    label: str
    unit: str
    stats: Stats | None
    target: Target | None = None
    note: str = ""
    baseline: float | None = None

    @property
    def vs_baseline(self) -> float | None:
        """The median over the baseline's (None without both)."""
        if self.stats is None or not self.baseline:
            return None
        return self.stats.median / self.baseline

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        """The row :meth:`to_json` wrote (its baseline left to the harness)."""
        stats = None if not data.get("n") else Stats(
            float(data["min"]), float(data["median"]), float(data["max"]), int(data["n"]))
        target = data.get("target")
        return cls(str(data["label"]), str(data["unit"]), stats,
                   None if target is None else Target.from_json(target),
                   str(data.get("note", "")))

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready data."""
        out: dict[str, Any] = {"label": self.label, "unit": self.unit}
        out.update(self.stats.to_json() if self.stats else {"min": None, "median": None,
                                                             "max": None, "n": 0})
        if self.target is not None:
            out["target"] = self.target.to_json()
        if self.note:
            out["note"] = self.note
        if self.baseline is not None:
            out["baseline"] = _round(self.baseline)
            ratio = self.vs_baseline
            out["vs_baseline"] = None if ratio is None else _round(ratio)
        return out


@dataclass(slots=True)
class BenchResult:
    """A benchmark's figures, with what it measured and the parameters it ran with."""

    key: str
    heading: str
    title: str
    params: dict[str, Any]
    figures: list[Figure] = field(default_factory=list)

    @classmethod
    def from_json(cls, key: str, data: dict[str, Any]) -> BenchResult:
        """The benchmark :meth:`to_json` wrote."""
        return cls(key, str(data["heading"]), str(data["title"]), dict(data["params"]),
                   [Figure.from_json(f) for f in data["figures"]])

    def to_json(self) -> dict[str, Any]:
        """The benchmark as JSON-ready data."""
        return {
            "heading": self.heading,
            "title": self.title,
            "params": self.params,
            "figures": [f.to_json() for f in self.figures],
        }


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> Stats:
    """Per-repetition ratios of two figures measured side by side in the same runs."""
    return Stats.of([a / b for a, b in zip(numerators, denominators, strict=True)])


def timed_in_loop(fn: Callable[[], Awaitable[Any]], *, backend: str = "asyncio") -> float:
    """Seconds ``await fn()`` takes inside a fresh event loop (loop start-up not counted).

    The collector runs first so one repetition's garbage is not billed to the next.
    """
    gc.collect()

    async def main() -> float:
        started = time.perf_counter()
        await fn()
        # Return a float, not ``fn``'s result: asyncio's runner may repr the main task's
        # result on exit, and a large report would bill that to nobody's benefit.
        return time.perf_counter() - started

    return anyio.run(main, backend=backend)
