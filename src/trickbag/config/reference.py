"""The reference of recipe keys, generated from the schema: type, default, allowed values, one-line help.

The help of a key is the comment after it in the schema's source (``lr: float = ... # peak learning
rate``), so the schema stays the one place that describes a key. ``trickbag recipes --keys`` prints
it and docs/recipes.md is generated from it (a test fails when the page is stale).
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import re
import tokenize
import typing
from typing import Any

from pydantic import BaseModel

from trickbag.config.errors import variants

__all__ = ["KeyDoc", "key_docs", "keys_text", "keys_markdown"]


@dataclasses.dataclass(frozen=True)
class KeyDoc:
    key: str
    type: str
    default: str
    allowed: str
    help: str
    section_doc: str
    variant: str = ""  # a key of one variant of its section only, e.g. "name=step" (schedule.step_epochs)


def _comments(cls: type) -> dict[str, str]:
    """``{field: trailing comment}`` from the source of the class and its bases (a field's own class wins)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):
        if klass is not cls and issubclass(klass, BaseModel) and klass is not BaseModel:
            out.update(_own_comments(klass))
    return out | _own_comments(cls)


def _own_comments(cls: type) -> dict[str, str]:
    """``{field: trailing comment}`` from the class's source (empty when the source is not available)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    field, last_line = None, -1
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.start[1] == 4 and tok.start[0] != last_line:
            field, last_line = tok.string, tok.start[0]
        elif tok.type == tokenize.COMMENT and field and tok.start[0] == last_line:
            out.setdefault(field, tok.string.split("# noqa")[0].lstrip("# ").strip())
    return out


def _type_name(ann: Any) -> str:
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return "choice"
    if ann is type(None):
        return "null"
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(_type_name(a) for a in typing.get_args(ann))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(ann))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(ann, "__name__", str(ann)).replace("typing.", "")


def _allowed(field: Any) -> str:
    ann = field.annotation
    choices: list[str] = []
    for a in [ann, *typing.get_args(ann)]:
        if typing.get_origin(a) is typing.Literal:
            choices += [str(v) for v in typing.get_args(a)]
    if choices:
        return ", ".join(choices)
    bounds = []
    for m in field.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(m, name, None)
            if value is not None:
                bounds.append(f"{sign} {value}")
    return ", ".join(bounds)


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return ""
    if value == "":
        return "\"\""
    return "null" if value is None else (str(value).lower() if isinstance(value, bool) else repr(value).strip("'"))


def _first_line(model: type) -> str:
    return (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""


def _variant_docs(field: Any, members: dict[str, type[BaseModel]], prefix: str) -> list[KeyDoc]:
    """A section that is one of several, told apart by a tag key (``schedule``, by ``name``): the keys they
    share first (the tag key with every tag as its choices), then each variant's own keys."""
    first = next(iter(members.values()))
    base = next(c for c in first.__mro__
                if issubclass(c, BaseModel) and all(issubclass(m, c) for m in members.values()))
    shared = [n for n in base.model_fields if all(n in m.model_fields for m in members.values())]
    default = field.get_default(call_default_factory=True)
    out = []
    for d in key_docs(base, prefix):
        name = d.key[len(prefix):]
        if name not in shared:
            continue
        if all(typing.get_args(m.model_fields[name].annotation) == (tag,) for tag, m in members.items()):
            d = dataclasses.replace(d, type="choice", default=str(getattr(default, name, d.default)),
                                    allowed=", ".join(members))  # the tag key
        out.append(d)
    for tag, m in members.items():
        key = next((n for n in shared if typing.get_args(m.model_fields[n].annotation) == (tag,)), "")
        comments, doc = _comments(m), _first_line(m)
        out += [KeyDoc(f"{prefix}{n}", _type_name(f.annotation), _default(f), _allowed(f), comments.get(n, ""), doc,
                       f"{key}={tag}") for n, f in m.model_fields.items() if n not in shared]
    return out


def key_docs(model: type[BaseModel], prefix: str = "") -> list[KeyDoc]:
    """Every leaf key of ``model``, in schema order (a key of several variants of a section: once for each)."""
    out: list[KeyDoc] = []
    comments = _comments(model)
    doc = _first_line(model)
    for name, field in model.model_fields.items():
        ann = field.annotation
        members = variants(ann)
        if members is not None:
            out += _variant_docs(field, members, f"{prefix}{name}.")
            continue
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += key_docs(ann, f"{prefix}{name}.")
            continue
        help_ = comments.get(name) or (
            "switch the trick on" if name == "enabled" and prefix.startswith("tricks.") else ""
        )
        out.append(KeyDoc(f"{prefix}{name}", _type_name(ann), _default(field), _allowed(field), help_, doc))
    return out


def keys_text(model: type[BaseModel]) -> str:
    """Plain-text table of :func:`key_docs` (``trickbag recipes --keys``)."""
    docs = key_docs(model)
    width = max(len(d.key) for d in docs)
    lines, section = [], None
    for d in docs:
        head = d.key.rsplit(".", 1)[0] if "." in d.key else ""
        if (head, d.variant) != section:
            section = (head, d.variant)
            lines.append(f"\n[{head or 'top level'}{', ' + d.variant if d.variant else ''}] {d.section_doc}")
        allowed = f" ({d.allowed})" if d.allowed else ""
        lines.append(f"  {d.key:<{width}}  {d.type}{allowed} = {d.default}" + (f"  # {d.help}" if d.help else ""))
    return "\n".join(lines).strip() + "\n"


def _cell(text: str) -> str:
    return re.sub(r"([|])", r"\\\1", text)


def keys_markdown(model: type[BaseModel]) -> str:
    """docs/recipes.md: one table per section."""
    docs = key_docs(model)
    lines = ["# Recipe keys", "", "Every key a recipe (or a `key.sub=value` override) may set, generated from the "
             "schema by `trickbag recipes --keys` (a test fails when this page is stale). Types: `choice` takes one "
             "of the allowed values; `null` means unset.", ""]
    section = None
    for d in docs:
        head = d.key.rsplit(".", 1)[0] if "." in d.key else "top level"
        if (head, d.variant) != section:
            section = (head, d.variant)
            title = f"`{head}` with `{d.variant.replace('=', ': ')}`" if d.variant else f"`{head}`"
            lines += ["", f"## {title}", "", d.section_doc, "", "| key | type | default | allowed | what it does |",
                      "| --- | --- | --- | --- | --- |"]
        lines.append(f"| `{d.key}` | {_cell(d.type)} | `{_cell(d.default)}` | {_cell(d.allowed)} | {_cell(d.help)} |")
    return "\n".join(lines) + "\n"
