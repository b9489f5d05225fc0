"""Notebook parameters: defaults, declared rules, type and range checks, CLI parsing, the guard.

A notebook declares its parameters in two places side by side (see ``gsworkbench.jupyter``):
the rules, as keyword arguments of ``ParameterGuard(...)`` (dict literals, so they can be read
without running anything), and the defaults, as the ``parameters`` cell's ``name = literal`` lines.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RULE_KEYS = ("ge", "gt", "le", "lt", "choices", "path", "min_len", "help")
_BOUNDS = {"ge": (">=", lambda v, b: v >= b), "gt": (">", lambda v, b: v > b),
           "le": ("<=", lambda v, b: v <= b), "lt": ("<", lambda v, b: v < b)}  # fmt: skip


class ParameterError(ValueError):
    """A notebook parameter is unknown, of the wrong type or outside its allowed values."""


# ---- reading a notebook's declarations ---------------------------------------------------------


def parse_parameters_source(source: str) -> dict[str, Any]:
    """The ``name = literal`` assignments of a parameters cell, in order."""
    out: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = ast.literal_eval(node.value)
    return out


def parse_rules_source(source: str) -> dict[str, dict[str, Any]]:
    """The keyword arguments of the ``ParameterGuard(...)`` call in ``source`` (dict literals)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "ParameterGuard":
                try:
                    rules = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
                except ValueError as err:
                    raise ParameterError(f"ParameterGuard(...) rules must be dict literals ({err})") from None
                for pname, rule in rules.items():
                    check_rule(pname, rule)
                return rules
    return {}


def check_rule(name: str, rule: Any) -> None:
    """ParameterError unless ``rule`` is a dict of known rule keys."""
    if not isinstance(rule, dict):
        raise ParameterError(f"rule for parameter {name!r} must be a dict, got {rule!r}")
    unknown = sorted(set(rule) - set(RULE_KEYS))
    if unknown:
        raise ParameterError(f"rule for parameter {name!r} has unknown key(s) {unknown}; known: {', '.join(RULE_KEYS)}")
    if rule.get("path") not in (None, "file", "dir"):
        raise ParameterError(f"rule for parameter {name!r}: 'path' must be 'file' or 'dir', got {rule['path']!r}")


# ---- values ----------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return type(value).__name__


def _coerce_scalar(name: str, default: Any, value: Any) -> Any:
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)  # 1e4 given for a count
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ParameterError(
            f"parameter {name!r} must be of type {_type_name(default)} (default {default!r}), "
            f"got {_type_name(value)} {value!r}"
        )
    return value


def is_list_parameter(default: Any) -> bool:
    """A parameter whose default is a non-empty list takes a list of values of its elements' type."""
    return isinstance(default, list) and len(default) > 0


def coerce_parameter(name: str, default: Any, value: Any) -> Any:
    """``value`` checked against the type of ``default`` (an int is accepted for a float, an integral
    float for an int, a single value for a list)."""
    if default is None:
        return value
    if is_list_parameter(default):
        values = value if isinstance(value, (list, tuple)) else [value]
        return [_coerce_scalar(name, default[0], v) for v in values]
    return _coerce_scalar(name, default, value)


def check_value(name: str, value: Any, rule: Mapping[str, Any]) -> None:
    """ParameterError unless ``value`` (each element, for a list) meets ``rule``."""
    if not rule:
        return
    items = value if isinstance(value, list) else [value]
    if "min_len" in rule and isinstance(value, list) and len(value) < rule["min_len"]:
        raise ParameterError(f"parameter {name!r} needs at least {rule['min_len']} value(s), got {value!r}")
    for v in items:
        for key, (sign, ok) in _BOUNDS.items():
            if key in rule and isinstance(v, (int, float)) and not ok(v, rule[key]):
                raise ParameterError(f"parameter {name!r} must be {sign} {rule[key]!r}, got {v!r}")
        if "choices" in rule and v not in rule["choices"]:
            allowed = ", ".join(repr(c) for c in rule["choices"])
            raise ParameterError(f"parameter {name!r} must be one of {allowed}; got {v!r}")
        kind = rule.get("path")
        if kind and v != "":
            p = Path(v)
            if not (p.is_file() if kind == "file" else p.is_dir()):
                what = "file" if kind == "file" else "folder"
                raise ParameterError(f"parameter {name!r}: {what} not found: {v}")


def validate_parameters(
    defaults: Mapping[str, Any], given: Mapping[str, Any], rules: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """Defaults overridden by ``given``, every value checked against its rule; ParameterError otherwise."""
    rules = rules or {}
    undeclared = sorted(set(rules) - set(defaults))
    if undeclared:
        raise ParameterError(f"rules given for parameter(s) the notebook does not have: {', '.join(undeclared)}")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ParameterError(f"unknown notebook parameter(s): {', '.join(unknown)}; known: {', '.join(defaults)}")
    out = dict(defaults)
    for name, value in given.items():
        out[name] = coerce_parameter(name, defaults[name], value)
    for name, value in out.items():
        check_value(name, value, rules.get(name, {}))
    return out


def parse_cli_value(text: str, default: Any = None) -> Any:
    """A ``-p name value`` string: a number when it reads as one (``5e-2`` -> 0.05), else YAML (but
    ``a:b`` stays text, not YAML 1.1's base-60 number: e.g. a resolution schedule ``1000:4``).

    With the parameter's ``default``: text stays text for a string parameter, and a list parameter
    takes ``a,b,c`` or ``[a, b, c]`` or a single value.
    """
    import yaml

    if isinstance(default, str):
        return text
    if is_list_parameter(default):
        if text.strip().startswith("["):
            return [parse_cli_value(str(v), default[0]) if isinstance(v, str) else v for v in yaml.safe_load(text)]
        return [parse_cli_value(part.strip(), default[0]) for part in text.split(",") if part.strip()]
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    value = yaml.safe_load(text)
    if isinstance(value, (int, float)) and ":" in text:
        return text  # YAML 1.1 reads 1000:4 as the base-60 number 60004; nobody means that: text
    return value


def describe_rule(default: Any, rule: Mapping[str, Any]) -> str:
    """The allowed values of a parameter in words (``>= 1``, ``one of 'a', 'b'``, ``existing file``)."""
    parts = [f"{_BOUNDS[k][0]} {rule[k]!r}" for k in _BOUNDS if k in rule]
    if "choices" in rule:
        parts.append("one of " + ", ".join(repr(c) for c in rule["choices"]))
    if "path" in rule:
        parts.append(f"existing {'file' if rule['path'] == 'file' else 'folder'} or ''")
    if "min_len" in rule:
        parts.append(f"at least {rule['min_len']} value(s)")
    text = ", ".join(parts) or "any"
    return f"each {text}" if is_list_parameter(default) and parts else text


def type_label(default: Any) -> str:
    """``int``, ``float``, ``list[int]``..."""
    return f"list[{_type_name(default[0])}]" if is_list_parameter(default) else _type_name(default)


# ---- the in-notebook guard -------------------------------------------------------------------


class ParameterGuard:
    """In-notebook check of injected parameters against their types and the declared rules.

    ``ParameterGuard(name={"ge": 1}, ...)`` is created in the cell before the parameters cell; it
    records the source of every cell the kernel runs next (IPython's ``pre_run_cell`` event, which
    fires under papermill and nbval alike). ``check(globals())`` runs after papermill's injected cell:
    the first recorded cell is the parameters cell (the defaults), any later ones were injected.
    """

    def __init__(self, **rules: dict[str, Any]) -> None:
        for name, rule in rules.items():
            check_rule(name, rule)
        self.rules = rules
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython ships with every kernel
            get_ipython = None  # type: ignore[assignment]
        self._ip = get_ipython() if get_ipython is not None else None
        self._cells: list[str] = []
        if self._ip is not None:
            self._ip.events.register("pre_run_cell", self._record)

    def _record(self, info: Any) -> None:
        self._cells.append(info.raw_cell)

    def check(self, namespace: dict[str, Any]) -> dict[str, Any]:
        """The notebook's parameters (defaults + injected), validated; ParameterError otherwise.

        Coerced values (``1000`` given for a list, ``2`` for a float) are written back to ``namespace``.
        The error's traceback in the notebook is the calling cell's line, this method's raise and the
        message: the checks' own frames are dropped.
        """
        if self._ip is None:
            raise RuntimeError("ParameterGuard needs an IPython kernel")
        self._ip.events.unregister("pre_run_cell", self._record)
        cells = self._cells[:-1]  # the last recorded cell is the one calling check()
        if not cells:
            raise RuntimeError("run the parameters cell between ParameterGuard() and guard.check()")
        defaults = parse_parameters_source(cells[0])
        injected: dict[str, Any] = {}
        for src in cells[1:]:
            injected.update({k: namespace[k] for k in parse_parameters_source(src) if k in namespace})
        try:
            params = validate_parameters(defaults, injected, self.rules)
        except ParameterError as err:
            raise ParameterError(str(err)) from None
        namespace.update(params)
        return params
