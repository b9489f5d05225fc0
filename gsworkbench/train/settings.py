"""Checked dataclass fields: each field of a settings dataclass carries its rule in its metadata, and
:func:`check_settings` walks ``dataclasses.fields`` to enforce them, so a new field brings its own check.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Example:
...     steps: int = setting(10, kind="int", min=0)
...     def __post_init__(self) -> None:
...         check_settings(self)
>>> Example(steps=-1)
Traceback (most recent call last):
ValueError: steps must be an int >= 0, got -1

Rules (the keywords of :func:`setting`):

- ``kind``: ``"int"`` (not a bool), ``"number"`` (an int or float, not a bool), ``"bool"`` or
  ``"choice"`` (one of ``choices``); ``None`` checks nothing but ``convert``/``check``.
- ``min`` / ``max``: bounds of an ``int`` or ``number``, closed unless ``min_open`` / ``max_open``.
- ``optional``: ``None`` is also allowed.
- ``convert``: a function applied to the value first (it normalises, e.g. text to a tuple, and raises
  ValueError on bad input); the converted value is stored.
- ``check``: a function ``value -> str | None`` for rules the others cannot say (a message naming the
  allowed values, or None when the value is fine).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

KINDS = ("int", "number", "bool", "choice")


def setting(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING, **rule: Any) -> Any:
    """A dataclass field whose metadata holds ``rule`` (see the module docstring)."""
    unknown = set(rule) - {"kind", "min", "max", "min_open", "max_open", "optional", "choices", "convert", "check"}
    if unknown:
        raise TypeError(f"unknown setting rule(s): {', '.join(sorted(unknown))}")
    if rule.get("kind") not in (None, *KINDS):
        raise TypeError(f"setting kind must be one of {KINDS}, got {rule['kind']!r}")
    return dataclasses.field(default=default, default_factory=default_factory, metadata=rule)


def _is_number(value: object, kind: str) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind == "int" else isinstance(value, (int, float))


def _allowed(rule: dict[str, Any]) -> str:
    """What a rule allows, in words: "an int >= 0", "lie in (0, 1]", "one of ('a', 'b')"."""
    kind = rule.get("kind")
    if kind == "bool":
        text = "be True or False"
    elif kind == "choice":
        text = f"be one of {tuple(rule['choices'])}"
    else:
        lo, hi = rule.get("min"), rule.get("max")
        noun = "an int" if kind == "int" else "a number"
        if lo is not None and hi is not None:
            if kind == "int":
                text = f"be an int in {lo}..{hi}"
            else:
                left, right = "(" if rule.get("min_open") else "[", ")" if rule.get("max_open") else "]"
                text = f"lie in {left}{lo}, {hi}{right}"
        elif lo is not None:
            text = f"be {noun} {'>' if rule.get('min_open') else '>='} {lo}"
        elif hi is not None:
            text = f"be {noun} {'<' if rule.get('max_open') else '<='} {hi}"
        else:
            text = f"be {noun}"
    return f"be None or {text.removeprefix('be ')}" if rule.get("optional") else text


def check_value(name: str, value: Any, rule: dict[str, Any]) -> Any:
    """``value`` converted by the rule and checked; ValueError "<name> must ..., got <value>" otherwise."""
    convert: Callable[[Any], Any] | None = rule.get("convert")
    if convert is not None:
        value = convert(value)
    check: Callable[[Any], str | None] | None = rule.get("check")
    if check is not None:
        problem = check(value)
        if problem is not None:
            raise ValueError(f"{name} must {problem}, got {value!r}")
    kind = rule.get("kind")
    if kind is None or (value is None and rule.get("optional")):
        return value
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "choice":
        ok = isinstance(value, str) and value in rule["choices"]
    else:
        ok = _is_number(value, kind)
        lo, hi = rule.get("min"), rule.get("max")
        if ok and lo is not None:
            ok = value > lo if rule.get("min_open") else value >= lo
        if ok and hi is not None:
            ok = value < hi if rule.get("max_open") else value <= hi
    if not ok:
        raise ValueError(f"{name} must {_allowed(rule)}, got {value!r}")
    return value


def check_settings(obj: Any) -> None:
    """Checks every field of the dataclass instance ``obj`` that carries a rule, storing converted
    values (``object.__setattr__``, so frozen dataclasses too)."""
    for f in dataclasses.fields(obj):
        if not f.metadata:
            continue
        value = getattr(obj, f.name)
        checked = check_value(f.name, value, dict(f.metadata))
        if checked is not value:
            object.__setattr__(obj, f.name, checked)
