"""Config sections as typed dataclasses, built from YAML mappings and checked, with errors a user can act on.

Why strict: a typo such as ``trainer.kl_coeff`` silently falling back to a default wastes a GPU-day.
Every unknown key, wrong type and out-of-range value fails at start-up with the key, the file it
came from, and the nearest valid key.

The sections live with the code that reads them (tasks/, rollout/, population/, train's rooms) and
import nothing from here: a field's type is its annotation, and its range a bound written beside it,
``Annotated[int, ">= 2 (why)"]``. A bound is ``>= x``, ``> x``, ``<= x``, ``< x`` or an interval
``in [a, b)`` (any of ``[ ( ] )``), then optionally why; the text after the bound is only read by
people. A field may also be a nested section (``rollout.vllm``): keys, merges and overrides recurse.
"""

from __future__ import annotations

import dataclasses
import difflib
import operator
import re
import types
import typing
from typing import Any, Callable, Literal

import yaml


class ConfigError(ValueError):
    """A config problem the user must fix; the message says where and how."""


_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_IS_NUMBER = re.compile(rf"^{_NUMBER}$")
_COMPARE = re.compile(rf"^(>=|>|<=|<)\s*({_NUMBER})(?!\S)")
_INTERVAL = re.compile(rf"^in\s*([\[(])\s*({_NUMBER})\s*,\s*({_NUMBER})\s*([\])])(?!\S)")
_OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def parse_bound(text: str) -> Callable[[float], bool]:
    """The predicate a bound's text states; a text that states none is a programming error, raised here."""
    if m := _COMPARE.match(text):
        op, x = _OPS[m.group(1)], float(m.group(2))
        return lambda v: op(v, x)
    if m := _INTERVAL.match(text):
        lo_op = operator.ge if m.group(1) == "[" else operator.gt
        hi_op = operator.le if m.group(4) == "]" else operator.lt
        lo, hi = float(m.group(2)), float(m.group(3))
        return lambda v: lo_op(v, lo) and hi_op(v, hi)
    raise TypeError(f"config bound {text!r} states no range: write '>= 1', '> 0', 'in (0, 1]', ... then why")


def bounds(cls: type) -> dict[str, list[str]]:
    """field name -> the bound texts in its ``Annotated`` annotation (fields without any are left out)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {name: [m for m in tp.__metadata__ if isinstance(m, str)]
            for name, tp in hints.items() if typing.get_origin(tp) is typing.Annotated}


def nearest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)  # no close match: no unrelated suggestion
    return f" Did you mean '{close[0]}'?" if close else ""


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; ints are accepted where floats are."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _coerce(value, inner[0], where)
        for option in inner:  # a number or a keyword (run.stop_at_reward): the first that takes the value
            try:
                return _coerce(value, option, where)
            except ConfigError:
                continue
        words = [str(w) for a in inner if typing.get_origin(a) is Literal for w in typing.get_args(a)]
        hint = nearest(value, words) if isinstance(value, str) else ""
        raise ConfigError(f"{where}: {value!r} is neither {' nor '.join(_said(a) for a in inner)}"
                          + (" (nor null)" if type(None) in args else "") + f".{hint}")
    if origin is dict:
        key_tp, value_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__} {value!r}")
        return {_coerce(k, key_tp, f"{where} (a key)"): _coerce(v, value_tp, f"{where}.{k}") for k, v in value.items()}
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
        return [_coerce(v, item_tp, f"{where}[{k}]") for k, v in enumerate(value)]
    if origin is Literal:
        allowed = typing.get_args(tp)
        if not any(type(value) is type(a) and value == a for a in allowed):  # True is no 1
            raise ConfigError(f"{where}: {value!r} is not one of {list(allowed)}.{nearest(str(value), [str(a) for a in allowed])}")
        return value
    if tp is float:
        # PyYAML (YAML 1.1) reads "1e-6" as a string; a number is what the user meant.
        if isinstance(value, str) and _IS_NUMBER.match(value.strip()):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {type(value).__name__} {value!r}")
        if value != value:
            raise ConfigError(f"{where}: NaN is not allowed")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {type(value).__name__} {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
        return value
    raise TypeError(f"unsupported config annotation {tp!r} at {where}")


def _said(tp: Any) -> str:
    """A union member as an error names it: a number, an integer, one of ['best_known'], ..."""
    if typing.get_origin(tp) is Literal:
        return f"one of {list(typing.get_args(tp))}"
    return {float: "a number", int: "an integer", bool: "true or false", str: "a string"}.get(tp, str(tp))


def _moved(key: str, hints: dict, prefix: str) -> str | None:
    """Where an old flat key now lives: ``vllm_tp`` -> ``vllm.tp`` when ``vllm`` is a nested section with ``tp``."""
    head, _, rest = key.partition("_")
    section = hints.get(head)
    if rest and dataclasses.is_dataclass(section) and rest in {f.name for f in dataclasses.fields(section)}:
        return f"{prefix}.{head}.{rest}" if prefix else f"{head}.{rest}"
    return None


def build(cls: type, data: Any, prefix: str, source: str) -> Any:
    """``cls`` from a mapping: every key known, every value of its annotated type (nested sections recurse)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: '{prefix or 'top level'}' must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            if moved := _moved(str(key), hints, prefix):
                raise ConfigError(f"{source}: {dotted} is now {moved} (a nested section); write it there")
            raise ConfigError(f"{source}: unknown key '{dotted}'.{nearest(str(key), names)} Valid keys here: {', '.join(names)}")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = build(tp, value, dotted, source)
        else:
            kwargs[key] = _coerce(value, tp, f"{source}: {dotted}")
    return cls(**kwargs)


def check_bounds(section: Any, prefix: str, source: str) -> None:
    """Every field's bound, in nested sections too; None (an optional setting left unset) passes."""
    for name, texts in bounds(type(section)).items():
        value = getattr(section, name)
        for text in texts:
            holds = parse_bound(text)  # parsed even for None: a bound that states no range fails every load
            if value is not None and not holds(value):
                raise ConfigError(f"{source}: {prefix}{name} = {value!r} must be {text}")
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            check_bounds(value, f"{prefix}{f.name}.", source)


def merge(base: dict, override: dict, cls: type) -> dict:
    """``override`` on ``base``, key by key, as deep as ``cls`` has nested sections: an overlay that
    sets ``rollout.vllm.tp`` keeps the base's other ``rollout.vllm`` keys. A setting's value replaces
    the base's whole, a mapping too (``evolution.operators``: the mix given is the mix run)."""
    out = dict(base)
    hints = typing.get_type_hints(cls)
    for key, value in override.items():
        section = hints.get(key)
        if dataclasses.is_dataclass(section) and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value, section)
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict:
    """``trainer.lr=2e-6`` -> {"trainer": {"lr": 2e-6}}, ``rollout.vllm.tp=2`` -> {"rollout": {"vllm": {"tp": 2}}};
    the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override '{text}' must look like section.key=value")
    key, raw = text.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ConfigError(f"override '{text}': empty key segment")
    value = yaml.safe_load(raw) if raw.strip() else ""
    out: dict = {}
    node = out
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def flatten(section: Any, prefix: str = "") -> dict[str, Any]:
    """{"rollout.vllm.tp": 1, ...}: every setting by its dotted name (a mapping-valued one stays one setting)."""
    out = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            out.update(flatten(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = value
    return out


def leaves(data: dict, cls: type, prefix: str = "") -> dict[str, Any]:
    """A YAML mapping's settings by dotted name, as deep as ``cls`` has nested sections
    (``{"rollout": {"vllm": {"tp": 2}}}`` -> ``{"rollout.vllm.tp": 2}``); a mapping-valued setting
    (``evolution.operators``) and a key ``cls`` does not know stay one setting (load_config judges them)."""
    hints = typing.get_type_hints(cls)
    out = {}
    for key, value in data.items():
        section = hints.get(key)
        if isinstance(value, dict) and dataclasses.is_dataclass(section):
            out.update(leaves(value, section, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
