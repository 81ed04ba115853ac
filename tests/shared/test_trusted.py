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


# --- the canary: what shared/trusted.py assumes of pydantic's internals -------------------
# Prevalidated writes a model's instance state itself, and SharesFieldsSet replaces the
# fields-set validation made. Both hold only while pydantic keeps that state in exactly
# these slots and assigns the fields-set before model_post_init runs. A pydantic that
# changes either fails here first (pyproject bounds pydantic to the versions seen pass).
SLOTS = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")


def test_pydantic_keeps_an_instances_state_in_the_four_slots_trusted_writes() -> None:
    """BaseModel's per-instance state is the four slots Prevalidated sets, and no other."""
    assert BaseModel.__slots__ == SLOTS


@pytest.mark.parametrize(
    ("model", "values"),
    [
        pytest.param(Row, {"name": "a", "count": 2, "tags": ["x"]}, id="row"),
        pytest.param("coordinator.report:SubtaskOutcome", None, id="subtask-outcome"),
        pytest.param("shared.envelope:Finding", None, id="finding"),
    ],
)
def test_a_prevalidated_instance_is_what_model_construct_makes(
    model: type[BaseModel] | str, values: dict[str, object] | None
) -> None:
    """Slot for slot, Prevalidated makes the instance pydantic's documented
    model_construct(_fields_set=...) makes, for the models fanout builds with it."""
    import importlib

    if isinstance(model, str):
        module, _, name = model.partition(":")
        model = getattr(importlib.import_module(module), name)
    assert isinstance(model, type)
    if values is None:  # a validated instance of the real model gives valid values
        values = dict(_example(model).__dict__)
    build = Prevalidated(model)
    ours, theirs = build(dict(values)), model.model_construct(build.fields_set, **values)
    for slot in SLOTS:
        assert getattr(ours, slot) == getattr(theirs, slot), slot
    assert ours == theirs
    assert ours.model_dump_json() == theirs.model_dump_json()


def _example(model: type[BaseModel]) -> BaseModel:
    from coordinator.report import SubtaskOutcome
    from shared.envelope import Finding

    if model is SubtaskOutcome:
        return SubtaskOutcome(id="s1", query="q", weight=1.0, status="complete", attempts=1,
                              rounds=1, steps=2, findings=1, started_s=0.0, ended_s=1.0)
    assert model is Finding
    return Finding(tool="search", data={"hits": 1}, args={"q": "x"}, empty=False,
                   complete=True, trace_id="t1")


def test_pydantic_sets_the_fields_set_before_model_post_init() -> None:
    """SharesFieldsSet swaps the fields-set in model_post_init: validation must have set
    it already, and must not set it again after."""
    seen: list[set[str]] = []

    class Probe(BaseModel):
        model_config = ConfigDict(frozen=True)
        name: str

        def model_post_init(self, context: object, /) -> None:
            seen.append(self.__pydantic_fields_set__)
            object.__setattr__(self, "__pydantic_fields_set__", {"swapped"})

    probe = Probe(name="a")
    assert seen == [{"name"}]
    assert probe.model_fields_set == {"swapped"}
