"""Tools: a name, a parameter schema, side-effect flags, and the body that runs."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

import pydantic

from subagents.schema import SchemaViolation, params_to_schema, validate

ToolBody = Callable[..., Any] | Callable[..., Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool body may return to say more than its data.

    ``empty`` marks a valid result with nothing in it (not an error); ``complete=False``
    marks partial data (page 1 of 3). A body that returns anything else returns data;
    ``None`` and empty containers count as empty.
    """

    data: Any
    empty: bool = False
    complete: bool = True


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a tool body may learn about the call it serves (ask for it as ``ctx``)."""

    tool: str
    attempt: int
    trace_id: str
    idempotency_key: str
    scope: str = ""


@dataclass(frozen=True)
class Tool:
    """A callable tool with a JSON-Schema parameter schema, validated before every call.

    Build one with :meth:`from_function` (schema from type hints) or :meth:`from_schema`
    (a JSON Schema, or a scenario's ``params`` dict).
    """

    name: str
    body: ToolBody
    schema: Mapping[str, Any]
    description: str = ""
    side_effects: bool = False
    idempotent: bool = True
    wants_context: bool = False
    is_async: bool = False
    # A real tool (MCP, a built-in, a Python function, a provider's model) keeps its real
    # timeouts and waits under --speed; only simulated tools run on scaled time.
    real_time: bool = True
    # A search (docs/design.md §7, "Search first"): a model-planned subtask that may call it starts
    # by calling it on its own query. docs.search and web.search are searches by name.
    search: bool = False
    _model: type[pydantic.BaseModel] | None = field(default=None, repr=False, compare=False)
    _fields: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def check_args(self, args: Mapping[str, Any]) -> SchemaViolation | None:
        """The first problem with ``args``, or None when they may be sent."""
        if self._model is not None:
            try:
                self._model.model_validate(dict(args))
            except pydantic.ValidationError as exc:
                return _violation_from_pydantic(exc, args)
            return None
        return validate(dict(args), self.schema)

    def prepare_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the body receives them (coerced by the model, if any)."""
        if self._model is None:
            return dict(args)
        model = self._model.model_validate(dict(args))
        return {name: getattr(model, name) for name in self._field_names()}

    def accept(self, args: Mapping[str, Any]) -> SchemaViolation | dict[str, Any]:
        """:meth:`check_args` and :meth:`prepare_args` in one validation: the first
        problem with ``args``, or the arguments as the body receives them."""
        cls = type(self)
        if cls.check_args is not Tool.check_args or cls.prepare_args is not Tool.prepare_args:
            # A subclass that redefines either keeps exactly its own behaviour.
            violation = self.check_args(args)
            return violation if violation is not None else self.prepare_args(args)
        if self._model is None:
            plain = dict(args)
            violation = validate(plain, self.schema)
            return plain if violation is None else violation
        try:
            model = self._model.model_validate(dict(args))
        except pydantic.ValidationError as exc:
            return _violation_from_pydantic(exc, args)
        return {name: getattr(model, name) for name in self._field_names()}

    def _field_names(self) -> tuple[str, ...]:
        if self._fields is not None:
            return self._fields
        assert self._model is not None
        return tuple(self._model.model_fields)

    @classmethod
    def from_function(
        cls,
        fn: ToolBody,
        *,
        name: str | None = None,
        description: str | None = None,
        side_effects: bool = False,
        idempotent: bool | None = None,
    ) -> Tool:
        """A tool whose schema comes from ``fn``'s signature and type hints.

        A parameter named ``ctx`` receives the :class:`CallContext` and is not part of
        the schema. ``idempotent`` defaults to True, or to False when ``side_effects``.
        """
        signature = inspect.signature(fn)
        # include_extras keeps Annotated[int, Field(le=20)] constraints for the schema.
        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        wants_context = False
        for pname, param in signature.parameters.items():
            if pname == "ctx":
                wants_context = True
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {fn.__name__}: *args/**kwargs cannot be described")
            annotation = hints.get(pname, Any)
            default = ... if param.default is param.empty else param.default
            fields[pname] = (annotation, default)
        model = pydantic.create_model(
            f"{fn.__name__}_args",
            __config__=pydantic.ConfigDict(extra="forbid", strict=False),
            **fields,
        )
        schema = model.model_json_schema()
        schema.pop("title", None)
        return cls(
            name=name or fn.__name__,
            body=fn,
            schema=schema,
            description=description or inspect.getdoc(fn) or "",
            side_effects=side_effects,
            idempotent=(not side_effects) if idempotent is None else idempotent,
            wants_context=wants_context,
            is_async=_is_async_callable(fn),
            _model=model,
            _fields=tuple(model.model_fields),
        )

    @classmethod
    def from_schema(
        cls,
        name: str,
        body: ToolBody,
        schema: Mapping[str, Any],
        *,
        description: str = "",
        side_effects: bool = False,
        idempotent: bool | None = None,
        wants_context: bool | None = None,
        real_time: bool = True,
        search: bool = False,
    ) -> Tool:
        """A tool with an explicit schema: a JSON Schema, or a scenario ``params`` dict."""
        if schema.get("type") != "object":
            schema = params_to_schema(schema)
        if wants_context is None:
            wants_context = "ctx" in inspect.signature(body).parameters
        return cls(
            name=name,
            body=body,
            schema=schema,
            description=description,
            side_effects=side_effects,
            idempotent=(not side_effects) if idempotent is None else idempotent,
            wants_context=wants_context,
            is_async=_is_async_callable(body),
            real_time=real_time,
            search=search,
        )


def _is_async_callable(fn: ToolBody) -> bool:
    """True for an async function, or an object whose ``__call__`` is async.

    ``inspect.iscoroutinefunction`` is False for such an object; run as a sync body in a
    worker thread it would return an unawaited coroutine as its "data".
    """
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _violation_from_pydantic(
    exc: pydantic.ValidationError, args: Mapping[str, Any]
) -> SchemaViolation:
    first: Any = exc.errors(include_url=False)[0]
    loc = first.get("loc", ())
    field_name = ".".join(str(p) for p in loc) or "<arguments>"
    kind = first.get("type", "")
    if kind == "missing":
        expected, got = "a required argument", "nothing"
    elif kind == "extra_forbidden":
        expected, got = "no such argument", repr(first.get("input"))
    else:
        expected = str(first.get("msg", "a valid value"))
        expected = expected[0].lower() + expected[1:] if expected else expected
        got = repr(first.get("input"))
    return SchemaViolation(field=field_name, expected=expected, got=got[:60])


def described(tools: Mapping[str, Tool]) -> dict[str, Any]:
    """Tools' descriptions and schemas, as a run's ``catalogue`` event keeps them (a
    recording stands simulated tools in for them)."""
    return {
        name: {"description": tool.description, "schema": dict(tool.schema)}
        for name, tool in tools.items()
    }
