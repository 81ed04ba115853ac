"""A model turn's tool calls run together (DESIGN §7, "Parallel calls"): which calls may
start beside one another, the gate for all of them, and their events in call order."""

from subagents.turns.batch import call_one, may_lead, room_for, take_together, trigger_for
from subagents.turns.ordering import Post, run_together

__all__ = ["Post", "call_one", "may_lead", "room_for", "run_together", "take_together",
           "trigger_for"]
