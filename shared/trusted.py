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
:class:`SharesFieldsSet` does the same for models that come out of validation.
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


# One fields-set per distinct set of field names a model was given: bounded by the
# models' shapes (a handful per spec model), never by the number of instances.
_SHARED: dict[frozenset[str], set[str]] = {}


class SharesFieldsSet(BaseModel):
    """A frozen model that trades the fields-set validation made it for the one every
    instance with the same set fields shares, as soon as it is made.

    Validation makes a fresh ``model_fields_set`` per instance (216 bytes, 728 at five
    fields or more); a file's 100,000 subtasks mostly set the same fields. Swapping it
    at once, not after the whole job is built, lets the next instance's set reuse the
    freed one's memory: sets freed after the fact were left as holes between the kept
    objects (a 100,000-subtask job spec: 220 → 176 MiB resident). The sets are equal
    before and after, so nothing that reads them can tell; frozen models never add to
    theirs, and ``model_copy`` copies it.
    """

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if not cls.model_config.get("frozen"):
            raise TypeError(f"{cls.__name__} is not frozen: its fields-set could change")

    def model_post_init(self, context: Any, /) -> None:
        own = self.__pydantic_fields_set__
        common = _SHARED.setdefault(frozenset(own), own)
        if common is not own:
            _set(self, "__pydantic_fields_set__", common)
