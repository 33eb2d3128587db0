"""Facts about the environment that several rules read (which calls read or set an environment variable):
helpers that name no rule."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name
from trickbag.audit._flow import FileModel

__all__: list[str] = []

_ENV_METHODS = {"get", "setdefault", "pop", "__getitem__", "__setitem__"}


def is_environ(node: ast.AST, file: FileModel) -> bool:
    return file.imports.qualname(node) == "os.environ"


def env_call_keys(node: ast.Call, file: FileModel) -> Iterator[tuple[str, ast.AST, bool]]:
    func, name = node.func, call_name(node)
    qual = file.imports.qualname(func)
    on_environ = isinstance(func, ast.Attribute) and is_environ(func.value, file)
    if (on_environ and name in _ENV_METHODS) or qual in ("os.getenv", "os.putenv", "os.unsetenv"):
        if node.args and isinstance(a0 := node.args[0], ast.Constant) and isinstance(a0.value, str):
            yield a0.value, node, name in ("setdefault", "putenv", "__setitem__")
    if (on_environ and name == "update") or (name == "dict" and node.args and is_environ(node.args[0], file)):
        for k in node.keywords:
            if k.arg:
                yield k.arg, node, True
        for d in node.args:
            if isinstance(d, ast.Dict):
                for key in d.keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        yield key.value, key, True
