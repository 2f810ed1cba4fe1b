"""ToolSpec / ToolArg: what the planner asks JARB to build (seed 002, section 6.2), validated.

A spec names a snake_case tool, its arguments (types from a small known set), its return type, its side
effects (from the known vocabulary, or declared new with a description in `new_side_effects`) and examples.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{1,62}$")
_SCALARS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "Any": {},
}
_ALIASES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "any": "Any",
            "dict": "Dict[str, Any]", "list": "List[Any]", "None": "None"}
KNOWN_TYPES_TEXT = ("str, int, float, bool, Any, List[T], Dict[str, T], Optional[T] "
                    "(T one of those; list[...] and dict[...] are accepted too)")


class SpecError(ValueError):
    """A spec that cannot be built; the message lists every problem."""


def normalize_type(text: str) -> str:
    """'list[str]' -> 'List[str]', 'dict' -> 'Dict[str, Any]', 'str | None' -> 'Optional[str]'."""
    t = " ".join(str(text).split())
    if not t:
        raise ValueError("empty type")
    if "|" in t:
        parts = [p.strip() for p in t.split("|")]
        others = [p for p in parts if p != "None"]
        if len(parts) == 2 and len(others) == 1:
            return f"Optional[{normalize_type(others[0])}]"
        raise ValueError(f"unions are not supported ({text!r}); use Optional[T] or Any")
    t = _ALIASES.get(t, t)
    m = re.fullmatch(r"(\w+)\[(.*)\]", t)
    if not m:
        if t in _SCALARS:
            return t
        raise ValueError(f"unknown type {text!r}; known: {KNOWN_TYPES_TEXT}")
    head, inner = m.group(1), m.group(2)
    head_l = head.lower()
    if head_l == "list":
        return f"List[{normalize_type(inner)}]"
    if head_l == "optional":
        return f"Optional[{normalize_type(inner)}]"
    if head_l == "dict":
        key, sep, value = inner.partition(",")
        if not sep or key.strip() not in ("str", "string"):
            raise ValueError(f"dict types need string keys: Dict[str, T] (got {text!r})")
        return f"Dict[str, {normalize_type(value.strip())}]"
    raise ValueError(f"unknown type {text!r}; known: {KNOWN_TYPES_TEXT}")


def json_schema_for(type_text: str) -> dict[str, Any]:
    t = normalize_type(type_text)
    if t in _SCALARS:
        return dict(_SCALARS[t])
    head, inner = t.split("[", 1)
    inner = inner[:-1]
    if head == "List":
        return {"type": "array", "items": json_schema_for(inner)}
    if head == "Optional":
        return {"anyOf": [json_schema_for(inner), {"type": "null"}]}
    return {"type": "object", "additionalProperties": json_schema_for(inner.split(",", 1)[1].strip())}


def py_annotation(type_text: str) -> str:
    """The annotation to write in generated code: builtin generics, `T | None`."""
    t = normalize_type(type_text)
    if t in _SCALARS:
        return t
    head, inner = t.split("[", 1)
    inner = inner[:-1]
    if head == "List":
        return f"list[{py_annotation(inner)}]"
    if head == "Optional":
        return f"{py_annotation(inner)} | None"
    return f"dict[str, {py_annotation(inner.split(',', 1)[1].strip())}]"


class ToolArg(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="a snake_case Python identifier")
    type: str = Field(description=f"one of: {KNOWN_TYPES_TEXT}")
    description: str = Field(description="what the argument means, with units and format")

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", v or "") or keyword.iskeyword(v):
            raise ValueError(f"argument name {v!r} must be a snake_case Python identifier (not a keyword)")
        return v

    @field_validator("type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        return normalize_type(v)

    @property
    def required(self) -> bool:
        return not self.type.startswith("Optional[")


class ToolSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="snake_case, e.g. word_count; also the module's entry-point function")
    description: str = Field(description="what the tool does, for the model that will call it")
    args: list[ToolArg] = Field(default_factory=list)
    return_type: str = Field("Any", description=f"one of: {KNOWN_TYPES_TEXT}")
    side_effects: list[str] = Field(default_factory=list,
                                    description="effects from the known vocabulary (e.g. fs_write, network); [] if none")
    new_side_effects: dict[str, str] = Field(default_factory=dict,
                                             description="effects not in the vocabulary: name -> what it does")
    examples: list[str] = Field(default_factory=list, description="example calls in natural language, with results")

    @field_validator("name")
    @classmethod
    def _snake(cls, v: str) -> str:
        if not NAME_RE.fullmatch(v or ""):
            raise ValueError(f"tool name {v!r} must be snake_case: a lowercase letter, then letters, digits or _ "
                             "(2 to 63 characters)")
        if keyword.iskeyword(v) or v in sys.builtin_module_names or v in sys.stdlib_module_names:
            raise ValueError(f"tool name {v!r} is a Python keyword or module name; pick another name")
        if v.startswith("test"):
            raise ValueError(f"tool name {v!r} must not start with 'test' (pytest would collect it)")
        return v

    @field_validator("description")
    @classmethod
    def _described(cls, v: str) -> str:
        if not (v or "").strip():
            raise ValueError("description is empty: say what the tool does")
        return v.strip()

    @field_validator("return_type")
    @classmethod
    def _ret(cls, v: str) -> str:
        return "None" if v == "None" else normalize_type(v)

    @model_validator(mode="after")
    def _unique_args(self) -> "ToolSpec":
        names = [a.name for a in self.args]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"argument names repeat: {', '.join(dupes)}")
        for effect in [*self.side_effects, *self.new_side_effects]:
            if not re.fullmatch(r"[a-z][a-z0-9_]*", effect):
                raise ValueError(f"side effect {effect!r} must be snake_case")
        return self

    # -- derived ------------------------------------------------------------------------------------------
    def args_schema(self) -> dict[str, Any]:
        props = {a.name: {**json_schema_for(a.type), "description": a.description} for a in self.args}
        return {"type": "object", "properties": props, "required": [a.name for a in self.args if a.required],
                "additionalProperties": False}

    def signature(self) -> str:
        ordered = [a for a in self.args if a.required] + [a for a in self.args if not a.required]  # defaults last
        params = [f"{a.name}: {py_annotation(a.type)}" + ("" if a.required else " = None") for a in ordered]
        ret = "None" if self.return_type == "None" else py_annotation(self.return_type)
        return f"def {self.name}({', '.join(params)}) -> {ret}:"

    def effects(self) -> list[str]:
        return list(dict.fromkeys([*self.side_effects, *self.new_side_effects]))


def parse_spec(raw: Any) -> ToolSpec:
    """A ToolSpec from a dict (or JSON text); SpecError with every problem in one message."""
    import json

    if isinstance(raw, ToolSpec):
        return raw
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise SpecError(f"the spec is not valid JSON: {exc}") from None
        except RecursionError:  # json recurses per level: a spec nested thousands deep
            raise SpecError("the spec is not valid JSON: it is nested too deep") from None
    if isinstance(raw, Mapping) and "spec" in raw and len(raw) == 1:
        raw = raw["spec"]
    if not isinstance(raw, Mapping):
        raise SpecError(f"the spec must be a JSON object, got {type(raw).__name__}")
    try:
        return ToolSpec.model_validate(dict(raw))
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            where = ".".join(str(p) for p in e["loc"]) or "spec"
            msg = e["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {msg}")
        raise SpecError("the tool spec is not valid: " + "; ".join(problems)) from None


def check_spec(spec: ToolSpec, *, known_effects: Mapping[str, str], taken_names: Iterable[str] = ()) -> None:
    """Checks that depend on the running Jarvis: name clashes and the effect vocabulary. Raises SpecError."""
    problems = []
    if spec.name in set(taken_names):
        problems.append(f"name {spec.name!r} is taken by an existing tool; pick another name")
    try:
        clash = importlib.util.find_spec(spec.name) is not None
    except (ImportError, ValueError):
        clash = False
    if clash:
        problems.append(f"name {spec.name!r} is an installed Python module; importing the tool by that name "
                        "would be ambiguous; pick another name")
    unknown = [e for e in spec.side_effects if e not in known_effects and e not in spec.new_side_effects]
    if unknown:
        problems.append(f"unknown side effects {', '.join(unknown)}: use the vocabulary "
                        f"({', '.join(sorted(known_effects))}) or declare them in new_side_effects with a description")
    clashing_new = [e for e in spec.new_side_effects if e in known_effects]
    if clashing_new:
        problems.append(f"new_side_effects {', '.join(clashing_new)} already exist in the vocabulary; "
                        "list them in side_effects instead")
    empty = [e for e, d in spec.new_side_effects.items() if not str(d).strip()]
    if empty:
        problems.append(f"new_side_effects {', '.join(empty)} need a description of what they do")
    if problems:
        raise SpecError("the tool spec cannot be built: " + "; ".join(problems))
