"""Models built from valid values share one fields-set and equal their validated twins."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from shared.trusted import Prevalidated, SharesFieldsSet


class Row(BaseModel):
    """A frozen model of a few fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    count: int = 0
    tags: list[str] = []


class Loose(BaseModel):
    """A model that is not frozen."""

    name: str


def test_a_prevalidated_instance_equals_the_validated_one() -> None:
    """Same values, same dump, same fields-set as validation gives."""
    build = Prevalidated(Row)
    row = build({"name": "a", "count": 2, "tags": ["x"]})
    twin = Row(name="a", count=2, tags=["x"])
    assert row == twin
    assert row.model_dump() == twin.model_dump()
    assert row.model_fields_set == twin.model_fields_set


def test_instances_share_one_fields_set_and_copies_do_not() -> None:
    """Every instance holds the same set; model_copy gives its copy a set of its own."""
    build = Prevalidated(Row)
    one, two = build({"name": "a", "count": 1, "tags": []}), build({"name": "b", "count": 2,
                                                                    "tags": []})
    assert one.model_fields_set is two.model_fields_set
    copied = one.model_copy(update={"count": 5})
    assert copied.count == 5
    assert copied.model_fields_set is not one.model_fields_set


def test_values_must_name_every_field() -> None:
    """A missing or unknown field is refused rather than left unset."""
    build = Prevalidated(Row)
    with pytest.raises(ValueError, match="missing"):
        build({"name": "a"})
    with pytest.raises(ValueError, match="unknown"):
        build({"name": "a", "count": 1, "tags": [], "extra": 1})


def test_only_frozen_models_are_accepted() -> None:
    """A model whose fields-set could grow cannot share one."""
    with pytest.raises(TypeError):
        Prevalidated(Loose)
    with pytest.raises(TypeError, match="not frozen"):

        class LooseShared(SharesFieldsSet):
            name: str


def test_validated_models_with_equal_fields_sets_end_up_sharing_one() -> None:
    """Equal fields-sets become one object as each model is made; different ones stay
    apart, all unchanged, and a copy with an update gets a set of its own."""

    class Shared(SharesFieldsSet):
        model_config = ConfigDict(frozen=True, extra="forbid")

        name: str
        count: int = 0

    rows = [Shared(name="a"), Shared(name="b"), Shared(name="c", count=1)]
    assert rows[0].model_fields_set is rows[1].model_fields_set == {"name"}
    assert rows[2].model_fields_set == {"name", "count"}
    assert rows[0].model_dump(exclude_unset=True) == {"name": "a"}
    moved = rows[0].model_copy(update={"count": 3})
    assert moved.model_fields_set == {"name", "count"}
    assert rows[1].model_fields_set == {"name"}
