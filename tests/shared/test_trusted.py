"""Models built from valid values share one fields-set and equal their validated twins."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from shared.trusted import FieldsSets, Prevalidated, sharing_fields_set


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
    with pytest.raises(TypeError, match="not frozen"):
        Prevalidated(Loose)


def test_a_model_with_an_equal_fields_set_is_rebuilt_around_the_shared_one() -> None:
    """The first of a shape lends its set; an equal later one comes back equal, holding
    that set; a different shape keeps its own."""
    common: FieldsSets = {}
    first, second, other = Row(name="a"), Row(name="b"), Row(name="c", count=1)
    assert sharing_fields_set(first, common) is first
    rebuilt = sharing_fields_set(second, common)
    assert rebuilt == second
    assert rebuilt.model_fields_set is first.model_fields_set
    assert sharing_fields_set(other, common).model_fields_set == {"name", "count"}
    changed = sharing_fields_set(first, common, tags=["t"])
    assert changed.tags == ["t"]
    assert changed.model_fields_set is first.model_fields_set


def test_a_jobs_subtasks_and_steps_share_their_fields_sets() -> None:
    """Validated subtasks (and their plans' steps) of one shape hold one fields-set; the
    subtasks a caller passed in are left as they were."""
    from coordinator.job import JobSpec
    from subagents.spec import CallStep, SubtaskSpec

    given = [SubtaskSpec(id=f"s{i}", query="q", plan=[CallStep(call="t")]) for i in range(3)]
    plans = [list(sub.plan) for sub in given]
    job = JobSpec(query="x", subtasks=given)
    assert job.subtasks == given
    assert len({id(sub.model_fields_set) for sub in job.subtasks}) == 1
    assert len({id(sub.plan[0].model_fields_set) for sub in job.subtasks}) == 1
    assert [list(sub.plan) for sub in given] == plans
    assert all(sub.plan[0] is plan[0] for sub, plan in zip(given, plans, strict=True))
    loaded = JobSpec.model_validate(
        {"query": "x", "subtasks": [{"id": "a", "query": "q"}, {"id": "b", "query": "q"}]}
    )
    assert loaded.subtasks[0].model_fields_set is loaded.subtasks[1].model_fields_set
