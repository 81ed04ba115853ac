"""The simulated tools of scenario files: their spec and their scripted responses."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.simulated.spec import ParamSpec, ResponseSpec, SimToolSpec, WhenRule
    from subagents.simulated.tools import SimulatedCrash, SimulatedTools

__all__ = [
    "ParamSpec",
    "ResponseSpec",
    "SimToolSpec",
    "SimulatedCrash",
    "SimulatedTools",
    "WhenRule",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.simulated.spec": ("ParamSpec", "ResponseSpec", "SimToolSpec", "WhenRule"),
    "subagents.simulated.tools": ("SimulatedCrash", "SimulatedTools"),
})
