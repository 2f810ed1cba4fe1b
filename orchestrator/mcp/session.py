"""The MCP client session Jarvis holds open per server: the SDK's ClientSession, with the check of a tool's
structured result against its output schema compiled once per tool instead of on every call.

Why: `ClientSession._validate_tool_result` calls `jsonschema.validate`, which re-checks the output schema
against its metaschema and builds a new validator for every call; with FastMCP servers (every function gets an
output schema) that was about a quarter of a local tool call's time. The check itself is the SDK's: same empty
`$ref` registry, same errors. If a later SDK drops the hook or the schema cache, the SDK's own check runs.
"""

from __future__ import annotations

from typing import Any

from mcp import ClientSession
from mcp import types as mt


class ValidatorCachingSession(ClientSession):
    _validators: dict[str, tuple[dict[str, Any], Any]]

    async def _validate_tool_result(self, name: str, result: mt.CallToolResult) -> None:
        schemas = getattr(self, "_tool_output_schemas", None)
        if not isinstance(schemas, dict) or name not in schemas or schemas[name] is None:
            return await super()._validate_tool_result(name, result)  # unlisted tool or no schema: the SDK's way
        schema = schemas[name]
        cache = self.__dict__.setdefault("_validators", {})
        entry = cache.get(name)
        if entry is None or entry[0] is not schema:  # a list_tools since then brings a new schema object
            entry = cache[name] = (schema, _compile(name, schema))
        if result.structuredContent is None:
            raise RuntimeError(f"Tool {name} has an output schema but did not return structured content")
        from jsonschema import ValidationError
        from referencing.exceptions import Unresolvable

        try:
            entry[1].validate(result.structuredContent)
        except ValidationError as e:
            raise RuntimeError(f"Invalid structured content returned by tool {name}: {e}") from None
        except Unresolvable as e:
            raise RuntimeError(f"Invalid schema for tool {name}: {e}") from e


def _compile(name: str, schema: dict[str, Any]) -> Any:
    from jsonschema import SchemaError, validators
    from referencing import Registry

    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        raise RuntimeError(f"Invalid schema for tool {name}: {e}") from None
    return cls(schema, registry=Registry())
