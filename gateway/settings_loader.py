"""Reading settings: layers merged (file, environment, flags), each value coerced to its
field's type and refused with SettingsError naming it. Generic over the settings
dataclasses; settings.py declares them and builds `Settings` with this."""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


class SettingsError(ValueError):
    pass


def merge(into: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value)
        elif isinstance(value, Mapping):
            into[key] = {}
            merge(into[key], value)
        else:
            into[key] = value


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """A settings dataclass's field types, resolved once per process: resolving the
    annotations (strings, under `from __future__ import annotations`) was most of the
    CPU of reading the settings, which every server start and every command does."""
    return typing.get_type_hints(cls)


def leaf_types(cls: type, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    hints = field_types(cls)
    leaves: dict[tuple[str, ...], Any] = {}
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            leaves.update(leaf_types(kind, (*path, field.name)))
        else:
            leaves[(*path, field.name)] = kind
    return leaves


def env_list(name: str, raw: str) -> list[Any]:
    """A JSON list, or words separated by commas (`photos,logs`)."""
    if not raw.lstrip().startswith("["):
        return [word.strip() for word in raw.split(",") if word.strip()]
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{name} must be a JSON list or words separated by commas: {exc}"
        ) from None
    if not isinstance(value, list):
        raise SettingsError(f"{name} must be a JSON list or words separated by commas")
    return value


def build(cls: type, values: Mapping[str, Any], path: str) -> Any:
    if not isinstance(values, Mapping):
        raise SettingsError(f"{path.rstrip('.') or 'settings'} must be a table")
    hints = field_types(cls)
    known = {field.name for field in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SettingsError(f"unknown setting {path}{unknown[0]}")
    defaults = cls()
    kwargs = {}
    for field in dataclasses.fields(cls):
        name = f"{path}{field.name}"
        kind = hints[field.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            base = dataclasses.asdict(getattr(defaults, field.name))
            merge(base, values.get(field.name, {}))
            kwargs[field.name] = build(kind, base, name + ".")
        elif field.name in values:
            kwargs[field.name] = coerce(values[field.name], kind, name)
    return cls(**kwargs)


def coerce(value: Any, kind: Any, name: str) -> Any:
    origin = typing.get_origin(kind)
    if origin is list:
        (item,) = typing.get_args(kind)
        if not isinstance(value, list):
            raise SettingsError(f"{name} must be a list")
        return [coerce(v, item, f"{name}[]") for v in value]
    if isinstance(kind, types.UnionType):
        kind = next(arg for arg in typing.get_args(kind) if arg is not type(None))
    if kind is bool:
        if isinstance(value, str) and value.lower() in TRUE_WORDS | FALSE_WORDS:
            return value.lower() in TRUE_WORDS
        if isinstance(value, bool):
            return value
        raise SettingsError(f"{name} must be true or false")
    if kind is int:
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        except (TypeError, ValueError):
            raise SettingsError(f"{name} must be an integer") from None
    if kind is float:
        try:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        except (TypeError, ValueError):
            raise SettingsError(f"{name} must be a number") from None
    if kind is Path:
        if not isinstance(value, (str, Path)):
            raise SettingsError(f"{name} must be a path")
        return Path(value)
    if kind is str:
        if not isinstance(value, str):
            raise SettingsError(f"{name} must be a string")
        return value
    raise SettingsError(f"{name}: unsupported setting type {kind}")
