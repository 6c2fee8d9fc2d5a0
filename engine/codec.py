"""Plain-data records to JSON values and back, driven by the dataclasses' own fields and
type hints (no MLX: replay decodes traces with no model).

`encode` turns a dataclass into a dict of its fields in declaration order, tuples into
lists, dict keys into strings, and floats that are not finite into None (JSON has no inf
or nan). `decode(hint, value)` rebuilds what the hint describes: dataclasses (a field the
data lacks takes its default, keys the class lacks are ignored, so files from older and
newer versions load), `tuple[X, ...]`, `Optional[X]`, `dict[int, V]` (keys back from
strings) and scalars. A value of the wrong type raises TypeError naming where it was, e.g.
`RoundRecord.ranks[0].rank: expected int, got 'x'`.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from functools import lru_cache
from typing import Any


def encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def decode(hint: Any, value: Any, **given: Any) -> Any:
    """`value` (parsed JSON) as `hint` describes it. For a dataclass, `given` supplies fields
    directly (already built, or not in the JSON at all)."""
    name = getattr(hint, "__name__", str(hint))
    if given:
        return _dataclass(hint, value, name, given)
    return _decode(hint, value, name)


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _dataclass(cls: type, data: Any, where: str, given: dict[str, Any]) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"{where}: expected an object, got {_show(data)}")
    hints, kwargs = _hints(cls), dict(given)
    for f in dataclasses.fields(cls):
        if f.name in kwargs:
            continue
        if f.name in data:
            kwargs[f.name] = _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise TypeError(f"{where}: missing {f.name!r}")
    return cls(**kwargs)


def _decode(hint: Any, value: Any, where: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint, value, where, {})
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = (a for a in args if a is not type(None))  # only Optional[X] is used
        return _decode(inner, value, where)
    if hint is tuple or origin is tuple:
        items = _expect(value, list, where)
        if not args:  # a bare `tuple`, e.g. a shape
            return tuple(items)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(items))
        if len(items) != len(args):
            raise TypeError(f"{where}: expected {len(args)} items, got {len(items)}")
        return tuple(_decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, items)))
    if hint is dict or origin is dict:
        key, item = args or (Any, Any)
        pairs = _expect(value, dict, where).items()
        return {_key(key, k, where): _decode(item, v, f"{where}[{k!r}]") for k, v in pairs}
    if hint is Any:
        return value
    if hint is float:
        if value is None:  # written for a float that was not finite
            return math.nan
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise TypeError(f"{where}: expected a number, got {_show(value)}")
    if hint in (int, str, bool):
        if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
            return value
        raise TypeError(f"{where}: expected {hint.__name__}, got {_show(value)}")
    raise TypeError(f"{where}: cannot decode a value of type {hint!r}")


def _key(hint: Any, key: str, where: str) -> Any:
    if hint is int:
        try:
            return int(key)
        except ValueError:
            raise TypeError(f"{where}: expected integer keys, got {_show(key)}") from None
    return key


def _expect(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise TypeError(f"{where}: expected {'an array' if kind is list else 'an object'}, "
                        f"got {_show(value)}")
    return value


def _show(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
