"""Frozen models built from values that are valid already: no validation, one fields-set.

The hot paths (a finding per result, a report row per subtask) build models from
typed state the program made itself. Validating it again was the cost that copying a
prototype (``model_copy(update=...)``) removed; but each copy still carries its own
``model_fields_set``, a ``set`` of every field name — 728 bytes for a model of five or
more fields, more than the instance's values. At 20,000 subtasks those sets alone
were over 50 MiB of a report. :class:`Prevalidated` does what ``model_construct``
does with ``_fields_set`` given (documented to be used as it is), and gives every
instance the same fields-set: the values name every field, so each instance would
have had an equal one anyway. Frozen models never add to it; ``model_copy`` copies it.
:func:`share_fields_sets` does the same for models that came out of validation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__


class Prevalidated(Generic[M]):
    """Builds instances of the frozen model ``cls`` from values naming every field."""

    __slots__ = ("cls", "fields", "fields_set")

    def __init__(self, cls: type[M], fields_set: Iterable[str] | None = None) -> None:
        if not cls.model_config.get("frozen"):
            raise TypeError(f"{cls.__name__} is not frozen: its fields-set could change")
        if cls.model_config.get("extra") == "allow" or cls.__pydantic_post_init__:
            raise TypeError(f"{cls.__name__} needs pydantic's own construction")
        self.cls = cls
        self.fields = frozenset(cls.model_fields)
        self.fields_set: set[str] = set(self.fields if fields_set is None else fields_set)

    def __call__(self, values: dict[str, Any]) -> M:
        """The instance ``cls.model_construct(_fields_set=..., **values)`` would make.

        ``values`` must hold every field, already of its type (nothing is checked or
        converted) and is kept as the instance's ``__dict__``.

        Raises:
            ValueError: ``values`` does not name exactly the model's fields.
        """
        if values.keys() != self.fields:
            missing = sorted(self.fields - values.keys())
            extra = sorted(values.keys() - self.fields)
            raise ValueError(f"{self.cls.__name__}: missing {missing}, unknown {extra}")
        model = _new(self.cls)
        _set(model, "__dict__", values)
        _set(model, "__pydantic_fields_set__", self.fields_set)
        _set(model, "__pydantic_extra__", None)
        _set(model, "__pydantic_private__", None)
        return model


def share_fields_sets(models: Iterable[BaseModel]) -> None:
    """Give validated frozen models with equal fields-sets one shared set object.

    Validation makes a fresh ``model_fields_set`` per instance (728 bytes at five or
    more fields); a file's 20,000 subtasks mostly set the same fields. The sets are
    equal before and after, so nothing that reads them can tell.

    Raises:
        TypeError: a model that is not frozen (its fields-set may still grow).
    """
    shared: dict[frozenset[str], set[str]] = {}
    for model in models:
        if not type(model).model_config.get("frozen"):
            raise TypeError(f"{type(model).__name__} is not frozen: its fields-set could change")
        own = model.__pydantic_fields_set__
        key = frozenset(own)
        common = shared.setdefault(key, own)
        if common is not own:
            _set(model, "__pydantic_fields_set__", common)
