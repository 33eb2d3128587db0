"""Pydantic's validation report turned into one line naming the key, the value and what is allowed."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["format_validation_error", "all_keys", "variants"]


def variants(annotation: Any) -> dict[str, type[BaseModel]] | None:
    """The sections of a section that is a union told apart by a tag (the recipe's ``schedule``: one section
    per ``schedule.name``), ``{tag: section}``; None for any other annotation."""
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return None
    out: dict[str, type[BaseModel]] = {}
    for member in typing.get_args(annotation):
        tags = [m.tag for m in getattr(member, "__metadata__", ()) if hasattr(m, "tag")]
        cls = typing.get_args(member)[0] if tags else member
        if not (tags and isinstance(cls, type) and issubclass(cls, BaseModel)):
            return None
        out[tags[0]] = cls
    return out


def _schema_keys(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _section_model(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = root
    parts = list(loc)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        if field is None:
            return None
        ann = field.annotation
        value_type = typing.get_args(ann)[-1] if typing.get_origin(ann) is dict else None
        if isinstance(value_type, type) and issubclass(value_type, BaseModel) and parts:
            parts.pop(0)  # a mapping of sections (data.bins.<column>): skip the key
            ann = value_type
        members = variants(ann)
        if members is not None and parts and str(parts[0]) in members:
            ann = members[str(parts.pop(0))]  # the section of one tag (schedule.<name>.<key>)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return None
    return model


def all_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every leaf key of ``model`` as a dotted name (``optim.lr``, ``tricks.mix.prob``, ...)."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        members = variants(ann)
        if members is not None:  # every key of every variant, once
            keys += dict.fromkeys(k for m in members.values() for k in all_keys(m, f"{prefix}{name}."))
        elif isinstance(ann, type) and issubclass(ann, BaseModel):
            keys += all_keys(ann, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def _without_tags(root: type[BaseModel], loc: tuple[str, ...]) -> tuple[str, ...]:
    """``loc`` without the tags pydantic puts after a tagged union (``schedule.cosine.min_lr`` ->
    ``schedule.min_lr``)."""
    model: Any = root
    out: list[str] = []
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        out.append(part)
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            out += parts
            break
        members = variants(field.annotation)
        if members is not None and parts and parts[0] in members:
            model = members[parts.pop(0)]
        else:
            model = field.annotation
    return tuple(out)


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:  # a self-referencing YAML structure
        return "<nested value>"
    return text if len(text) <= 60 else text[:57] + "..."


def _unknown_key(root: type[BaseModel], tagged: tuple[str, ...]) -> str:
    parent = _section_model(root, tagged[:-1])  # a tagged union's tag picks its section
    loc = _without_tags(root, tagged)
    key = ".".join(loc) if loc else "recipe"
    # compare the last part within its section: whole dotted keys share the section prefix, which
    # made any unknown key look close to some key of the same section
    prefix = ".".join(loc[:-1])
    names = difflib.get_close_matches(loc[-1], _schema_keys(parent), n=1, cutoff=0.6) if parent else []
    close = [f"{prefix}.{n}" if prefix else n for n in names] or difflib.get_close_matches(
        key, all_keys(root), n=1, cutoff=0.75
    )
    if close:
        return f"unknown recipe key {key!r} (did you mean {close[0]!r}?)"
    allowed = ", ".join(_schema_keys(parent)) if parent else ", ".join(_schema_keys(root))
    where = f"in '{'.'.join(loc[:-1])}'" if loc[:-1] else "at the top level"
    return f"unknown recipe key {key!r}; allowed {where}: {allowed or '(none)'}"


_KINDS = {int: "a whole number", float: "a number", bool: "true/false", str: "text", type(None): "null"}


def _union_allowed(root: type[BaseModel], loc: tuple[str, ...]) -> str | None:
    """What a key typed as a union accepts (``auto, a whole number, null``), when ``loc`` ends in one of
    the members pydantic tried (``train.threads.int``); else None."""
    parent = _section_model(root, loc[:-2]) if len(loc) >= 2 else None
    field = parent.model_fields.get(loc[-2]) if parent is not None else None
    if field is None or typing.get_origin(field.annotation) not in (typing.Union, types.UnionType) \
            or variants(field.annotation) is not None:
        return None
    parts: list[str] = []
    for member in typing.get_args(field.annotation):
        if typing.get_origin(member) is typing.Literal:
            parts += [str(v) for v in typing.get_args(member)]
        else:
            parts.append(_KINDS.get(member, getattr(member, "__name__", str(member))))
    return ", ".join(parts)


def format_validation_error(err: ValidationError, root: type[BaseModel]) -> str:
    """One line about the first problem pydantic found in a ``root`` document."""
    e = err.errors()[0]
    loc = tuple(str(p) for p in e["loc"])
    typ = e["type"]
    if typ == "recipe_line":  # a validator's own one-line message
        return str(e.get("ctx", {}).get("line", e["msg"]))
    if typ == "extra_forbidden":
        return _unknown_key(root, loc)
    loc = _without_tags(root, loc)
    key = ".".join(loc) if loc else "recipe"
    value = e.get("input")
    if typ == "union_tag_invalid":  # the tag key of a tagged union (schedule.name)
        tag = e.get("ctx", {}).get("tag", "")
        expected = str(e.get("ctx", {}).get("expected_tags", "")).replace("'", "")
        return f"recipe key {key + '.name'!r}: {tag!r} is not allowed; allowed: {expected}"
    if typ == "union_tag_not_found":
        return f"recipe key {key!r} must be a mapping of keys, got {_short(value)}"
    msg = e["msg"]
    union = _union_allowed(root, loc)
    if union is not None:
        return f"recipe key {'.'.join(loc[:-1])!r}: {_short(value)} is not allowed; allowed: {union}"
    if typ == "literal_error":
        expected = e.get("ctx", {}).get("expected", "")
        return f"recipe key {key!r}: {_short(value)} is not allowed; allowed: {expected}"
    if typ == "value_error" and not loc:
        return f"invalid recipe: {msg.removeprefix('Value error, ')}"
    if typ == "model_type" or typ == "dict_type":
        return f"recipe key {key!r} must be a mapping of keys, got {_short(value)}"
    msg = msg.removeprefix("Value error, ")
    return f"recipe key {key!r}: {_short(value)} is not allowed: {msg[0].lower() + msg[1:]}"
