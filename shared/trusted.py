"""Frozen models built from values that are valid already: no validation, one fields-set.

The hot paths (a finding per result, a report row per subtask) build models from
typed state the program made itself. Validating it again was the cost that copying a
prototype (``model_copy(update=...)``) removed; but each copy still carries its own
``model_fields_set``, a ``set`` of every field name — 728 bytes for a model of five or
more fields, more than the instance's values. At 20,000 subtasks those sets alone
were over 50 MiB of a report. :class:`Prevalidated` builds instances with pydantic's
``model_construct`` and gives every one the same fields-set (``_fields_set`` "is
directly used for the model_fields_set attribute", pydantic documents): the values name
every field, so each instance would have had an equal one anyway. Frozen models never
add to it; ``model_copy`` copies it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


class Prevalidated(Generic[M]):
    """Builds instances of the frozen model ``cls`` from values naming every field."""

    __slots__ = ("cls", "fields", "fields_set")

    def __init__(self, cls: type[M], fields_set: Iterable[str] | None = None) -> None:
        if not cls.model_config.get("frozen"):
            raise TypeError(f"{cls.__name__} is not frozen: its fields-set could change")
        self.cls = cls
        self.fields = frozenset(cls.model_fields)
        self.fields_set: set[str] = set(self.fields if fields_set is None else fields_set)

    def __call__(self, values: dict[str, Any]) -> M:
        """``cls.model_construct(_fields_set=..., **values)`` with the shared fields-set.

        ``values`` must hold every field, already of its type (nothing is checked or
        converted).

        Raises:
            ValueError: ``values`` does not name exactly the model's fields.
        """
        if values.keys() != self.fields:
            missing = sorted(self.fields - values.keys())
            extra = sorted(values.keys() - self.fields)
            raise ValueError(f"{self.cls.__name__}: missing {missing}, unknown {extra}")
        return self.cls.model_construct(self.fields_set, **values)



FieldsSets = dict[frozenset[str], set[str]]
"""The fields-sets met so far, one per distinct set of field names."""


def sharing_fields_set(model: M, common: FieldsSets, **changes: Any) -> M:
    """``model``, or an equal one whose fields-set is the one ``common`` holds for it.

    Validation makes a fresh ``model_fields_set`` per instance (216 bytes, 728 at five
    fields or more), and a file's 100,000 subtasks mostly set the same fields. The first
    model of a set of field names keeps its own and lends it to ``common``; a later one
    with an equal set (or any model given ``changes``, values of its fields) is rebuilt
    with ``model_construct`` around the shared set.
    """
    own = model.model_fields_set
    shared = common.setdefault(frozenset(own), own)
    if shared is own and not changes:
        return model
    return type(model).model_construct(shared, **(dict(model) | changes))
