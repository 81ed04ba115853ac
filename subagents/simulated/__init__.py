"""The simulated tools of scenario files: their spec and their scripted responses."""

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
