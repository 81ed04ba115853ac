"""A model turn's tool calls run together (docs/design.md §7, "Parallel calls"): which calls may
start beside one another, the gate for all of them, and their events in call order."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.turns.batch import call_one, may_lead, room_for, take_together, trigger_for
    from subagents.turns.ordering import Post, run_together

__all__ = ["Post", "call_one", "may_lead", "room_for", "run_together", "take_together",
           "trigger_for"]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.turns.batch": ("call_one", "may_lead", "room_for", "take_together", "trigger_for"),
    "subagents.turns.ordering": ("Post", "run_together"),
})
