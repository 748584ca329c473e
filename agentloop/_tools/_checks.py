"""The checks of a tool call's arguments: against a pydantic model or a JSON schema (jsonschema,
bounded by `_budget` and `_schema_checks`), after the reference's coercions (`_coerce`), and the
model-facing text of a failure."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._tool import AgentTool

__all__ = ("failure", "first_line", "validate_with_model", "validate_with_schema")


def failure(name: str, lines: list[str], arguments: Any) -> ValueError:
    import json

    from ._budget import MAX_ARGUMENT_DEPTH, argument_depth_over

    if argument_depth_over(arguments, MAX_ARGUMENT_DEPTH):
        received = f"(not shown: they nest more than {MAX_ARGUMENT_DEPTH} arrays and objects deep)"
    else:
        received = json.dumps(arguments, indent=2, ensure_ascii=False, default=repr)
    body = "\n".join(lines) or "  - root: Unknown validation error"
    return ValueError(f'Validation failed for tool "{name}":\n{body}\n\nReceived arguments:\n{received}')


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


def _validator(tool: AgentTool) -> Any:
    """The tool's JSON-schema validator, built once (jsonschema is imported on first use).

    Schemas may come from third parties and arguments from the model, so validating never
    reaches the network (`$ref`s resolve within the schema and the JSON-schema meta-schemas
    only), never runs a backtracking regular expression, and stops when the validation's budget
    is used up (`_schema_checks`, `_budget`). Checking the schema against its meta-schema is
    part of the first validation's budget; a schema found invalid, or to need more checks (or
    nesting) than the budget has, stays so (every call gets the same error at once).
    """
    validator = tool._validator
    if isinstance(validator, str):
        raise ValueError(validator)
    if validator is None:
        import jsonschema

        from ._budget import NeedsMore, TooCostly
        from ._schema_checks import bounded_validator_class, check_schema, local_registry, memo_safe

        schema = dict(tool.parameters)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            check_schema(cls, schema)
        except jsonschema.SchemaError as exc:
            tool._validator = f'tool "{tool.name}" has an invalid JSON schema: {exc.message}'
            raise ValueError(tool._validator) from None
        except TooCostly as exc:
            if isinstance(exc, NeedsMore):
                raise
            message = f'tool "{tool.name}" has a JSON schema that takes {exc.what} to check'
            if exc.lasting:  # too many checks, too deep: so it will be each time
                tool._validator = message
            raise ValueError(message) from None
        tool._memo_safe = memo_safe(schema)
        validator = tool._validator = bounded_validator_class(cls)(schema, registry=local_registry())
    return validator


def _json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (tools may change their arguments; the transcript's stay)."""
    if type(value) is dict:
        return {key: _json_copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_json_copy(item) for item in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return copy.deepcopy(value)


def _coerced(tool: AgentTool, arguments: Mapping[str, Any]) -> tuple[Any, bool]:
    """A copy of the arguments with the reference's coercions applied, and whether it was valid as sent."""
    from ._budget import TooCostly, current

    validator = _validator(tool)
    budget = current()
    if budget is not None and tool._memo_safe:
        budget.memo = {}  # the schema check is done: from here on, what a node found for a value is kept
    if not arguments:  # a call without arguments: whether {} is valid is known once per tool
        empty_ok = tool._empty_ok
        if empty_ok is None:
            try:
                empty_ok = tool._empty_ok = bool(validator.is_valid({}))
            except TooCostly:
                raise
            except Exception:
                empty_ok = tool._empty_ok = False
        if empty_ok:
            return {}, True
    args = _json_copy(dict(arguments))
    try:
        if validator.is_valid(args):
            return args, True  # nothing to coerce: a valid value converts to itself
    except TooCostly:
        raise
    except Exception:  # an unresolvable $ref: coerce what can be, the validation reports the rest
        pass

    from ._budget import value_key
    from ._coerce import coerce_arguments  # only arguments that need converting pay for it

    nodes: dict[int, Any] = {}
    answers: dict[tuple[int, object], tuple[Any, bool | None]] = {}

    def passes(node: Any, value: Any) -> bool | None:
        if not isinstance(node, dict):
            return None
        key = (id(node), value_key(value))
        known = answers.get(key)
        if known is not None:
            return known[1]
        sub = nodes.get(id(node))
        if sub is None:
            sub = nodes[id(node)] = validator.evolve(schema=node)
        try:
            answer: bool | None = bool(sub.is_valid(value))
        except TooCostly:
            raise
        except Exception:
            answer = None
        answers[key] = (value, answer)  # the value kept alive: its id stays its own
        return answer

    return coerce_arguments(validator.schema, args, passes), False


def validate_with_schema(tool: AgentTool, arguments: Mapping[str, Any]) -> Any:
    validator = _validator(tool)
    args, valid = _coerced(tool, arguments)
    if valid:
        return args
    schema = validator.schema
    found: list[tuple[list[tuple[int, ...]], str]] = []
    reported: set[tuple[Any, ...]] = set()
    for error in _errors(validator, args):
        at = list(error.absolute_path)
        base = ".".join(str(p) for p in at)
        if error.validator == "required" and isinstance(error.instance, dict):
            required = list(error.validator_value)
            for missing in required:
                if missing not in error.instance and (*at, missing) not in reported:
                    reported.add((*at, missing))
                    path = f"{base}.{missing}" if base else str(missing)
                    key = [*_error_order(schema, at), (1, required.index(missing))]
                    found.append((key, f"  - {path}: must have required property '{missing}'"))
            continue
        found.append(([*_error_order(schema, at), (0,)], f"  - {base or 'root'}: {error.message}"))
    if found:
        found.sort(key=lambda item: item[0])
        raise failure(tool.name, [line for _, line in found], arguments)
    return args


def _errors(validator: Any, args: Any) -> list[Any]:
    """Every validation error; a `$ref` that names nothing is an error, not a crash."""
    import jsonschema
    import referencing.exceptions

    try:
        return list(validator.iter_errors(args))
    except referencing.exceptions.Unresolvable as exc:
        error = jsonschema.ValidationError(
            f"the schema has a $ref that cannot be resolved ({exc}; references outside the schema are not fetched)"
        )
        return [error]


def _error_order(schema: Any, path: list[Any]) -> list[tuple[int, ...]]:
    """Where an error sorts, as the reference lists them: at each object, the value's own
    problems first, then its missing required properties, then its properties in schema order
    (depth first); array items by index."""
    key: list[tuple[int, ...]] = []
    node = schema
    for part in path:
        node = node if isinstance(node, dict) else {}
        if isinstance(part, int):
            key.append((2, part))
            items = node.get("items", node.get("prefixItems"))
            node = items[part] if isinstance(items, list) and part < len(items) else items
        else:
            found = node.get("properties")
            properties: dict[str, Any] = found if isinstance(found, dict) else {}
            names = list(properties)
            key.append((2, names.index(part) if part in properties else len(names)))
            node = properties.get(part)
    return key


def validate_with_model(tool: AgentTool, arguments: Mapping[str, Any]) -> Any:
    import pydantic

    # The reference's coercions first (7 -> "7", null for optional fields...), then the model.
    args, _ = _coerced(tool, arguments)
    try:
        return tool._model.model_validate(args)
    except pydantic.ValidationError as exc:
        lines = [f"  - {'.'.join(str(p) for p in err['loc']) or 'root'}: {err['msg']}" for err in exc.errors()]
        raise failure(tool.name, lines, arguments) from None
