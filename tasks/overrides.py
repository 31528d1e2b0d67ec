"""Command-line overrides checked before Hydra composes them, so a typo gets one line
naming the fix (exit 2) instead of Hydra's or OmegaConf's error: a key the schema lacks
(with or without `+`), a preset a config group lacks, a value of the wrong type."""
from __future__ import annotations

import dataclasses
import os
import typing

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from tasks.base import close_match
from tasks.config import CONFIG_DIR, GROUPS, Config, is_mapping


def schema_error(path: str) -> str | None:
    """Why dotted `path` is not a key of the schema (None if it is, or lies in a mapping)."""
    schema, parts = Config, path.split(".")
    for i, part in enumerate(parts):
        types = typing.get_type_hints(schema)
        if part not in types:
            where = ".".join(parts[:i])
            prefix = f"{where}." if where else ""
            near = close_match(prefix + part, [prefix + k for k in types])
            return (f"unknown key {prefix + part!r}{near}; valid keys"
                    f"{' of ' + where if where else ''}: {', '.join(types)}")
        tp = types[part]
        if is_mapping(tp):
            return None
        if not dataclasses.is_dataclass(tp):
            if i + 1 < len(parts):
                return f"unknown key {path!r}: {'.'.join(parts[:i + 1])} is a value, not a group"
            return None
        schema = tp
    return None


def schema_type(path: str):
    """The declared type of dotted `path` (None inside a free-form mapping)."""
    schema = Config
    for part in path.split("."):
        tp = typing.get_type_hints(schema)[part]
        if is_mapping(tp):
            return None
        schema = tp
    return schema


KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def value_error(key: str, value, text: str) -> str | None:
    """Why `value` (an override's parsed value, `text` as typed) does not fit `key`'s type;
    the one-line message run.py prints instead of OmegaConf's error."""
    tp = schema_type(key)
    if tp is None or dataclasses.is_dataclass(tp) or (isinstance(value, str) and "${" in value):
        return None
    holder = dataclasses.make_dataclass("Value", [("x", tp, dataclasses.field(default=MISSING))])
    try:
        OmegaConf.merge(OmegaConf.structured(holder), {"x": value})
    except OmegaConfBaseException:
        args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
        kind = " or ".join(KINDS.get(a, getattr(a, "__name__", str(a))) for a in args)
        if type(None) in typing.get_args(tp):
            kind += " or null"
        read = f" ({text} reads as {value!r})" if str(value) != text else ""
        return f"{key}={text} is not {kind}{read}"
    return None


def mapping_key(path: str) -> tuple[str, str] | None:
    """(the free-form mapping holding dotted `path`, the key in it), or None."""
    schema, parts = Config, path.split(".")
    for i, part in enumerate(parts[:-1]):
        tp = typing.get_type_hints(schema).get(part)
        if tp is None or not (is_mapping(tp) or dataclasses.is_dataclass(tp)):
            return None
        if is_mapping(tp):
            return ".".join(parts[:i + 1]), parts[i + 1]
        schema = tp
    return None


def default_choice(group: str) -> str:
    """The preset configs/config.yaml's defaults list picks for `group`."""
    for entry in OmegaConf.load(os.path.join(CONFIG_DIR, "config.yaml")).defaults:
        if isinstance(entry, dict) or OmegaConf.is_dict(entry):
            if group in entry:
                return entry[group]
    raise KeyError(group)


def mapping_key_error(path: str, tasks_named: list[str]) -> str | None:
    """Why `path` names no key of task.options (of each task named, else the default task),
    engine.compression or engine.extra (the engine's options). Hydra would answer a
    misspelled one with "use +key=", and `+` with the close match only once the run starts."""
    found = mapping_key(path)
    if found is None:
        return None
    mapping, key = found
    if mapping == "task.options":
        from tasks.base import get_task
        for name in tasks_named or [default_choice("task")]:
            try:
                fields = [f.name for f in dataclasses.fields(type(get_task(name).options))]
            except KeyError:
                return None  # an unknown task: named by the task= check
            if key not in fields:
                return (f"unknown option task.options.{key} for task {name}"
                        f"{close_match(key, fields)}; valid: {', '.join(fields)}")
    elif mapping in ("engine.compression", "engine.extra"):  # the engine's own key sets
        from zipage.config import COMPRESSION_KEYS, EngineConfig
        kind, valid = (("compression", COMPRESSION_KEYS) if mapping == "engine.compression"
                       else ("engine", EngineConfig.options()))
        if key not in valid:
            valid = sorted(valid)
            return (f"unknown {kind} option {mapping}.{key}{close_match(key, valid)}; "
                    f"valid: {', '.join(valid)}")
    return None


def group_options(group: str) -> list[str]:
    """The presets of a config group: configs/<group>/*.yaml."""
    folder = os.path.join(CONFIG_DIR, group)
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))


def check_overrides(argv: list[str]) -> str | None:
    """A message for the first command-line override naming a key the schema lacks, with or
    without `+` (Hydra itself would suggest `+key=`, which it then silently accepts), a
    preset a group lacks, or a value of the wrong type (one line, not OmegaConf's error)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    parser = OverridesParser.create()
    tasks_named, mapping_keys = [], []
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue  # Hydra's own flags (-m, --cfg job, ...)
        try:
            (ov,) = parser.parse_overrides([arg])
        except HydraException:
            continue  # Hydra reports syntax errors itself
        key = ov.key_or_group
        if ov.package or ov.is_delete() or key.startswith("hydra") or "/" in key:
            continue
        values = list(ov.sweep_iterator()) if ov.is_sweep_override() else [ov.value()]
        texts = (list(ov.sweep_string_iterator()) if ov.is_sweep_override()
                 else [arg.split("=", 1)[1]])
        if key in GROUPS:
            options = group_options(key)
            for name in texts:
                if name not in options:
                    return (f"unknown {key} {name!r}{close_match(name, options)}; "
                            f"available: {', '.join(options)}")
            tasks_named += texts if key == "task" else []
            continue
        err = schema_error(key)
        if err:
            return err
        mapping_keys.append(key)
        tasks_named += texts if key == "task.name" else []
        for value, text in zip(values, texts):
            err = value_error(key, value, text)
            if err:
                return err
    for key in mapping_keys:  # once every task= is known
        err = mapping_key_error(key, tasks_named)
        if err:
            return err
    return None
