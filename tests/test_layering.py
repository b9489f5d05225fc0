"""The package's house structure: no import cycle between modules, and no import up the layer table.

Every ``import`` and ``from ... import`` of every module in ``gsworkbench/`` counts, those inside
functions too (a lazy import still ties two modules together). A module may import its own layer or a
lower one; the table is also in docs/design.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "gsworkbench"

# Module (or package prefix) -> layer. The longest matching prefix decides; every module must match one.
LAYERS = {
    # 1 foundations: no capability, only what every layer shares
    "gsworkbench": 1,  # the package's own __init__ (the libz preload, the lazy compile_step)
    "gsworkbench._ext": 1,
    "gsworkbench._libz": 1,
    "gsworkbench.compile": 1,
    "gsworkbench.gaussians": 1,
    "gsworkbench.interrupt": 1,
    "gsworkbench.memory": 1,
    "gsworkbench.validation": 1,
    "gsworkbench.project": 1,
    "gsworkbench.provenance": 1,
    "gsworkbench.io.atomic": 1,
    "gsworkbench.runs": 1,
    "gsworkbench.figures": 1,
    "gsworkbench.numba_threads": 1,  # the numba peers' thread count, shared by field and transforms
    # 2 data: the splat container, scenes and the file formats
    "gsworkbench.splats": 2,
    "gsworkbench.scenes": 2,
    "gsworkbench.io": 2,
    "gsworkbench.splat.cameras": 2,  # the camera convention that scenes and the rasterizer share
    # 3 ops: what computes on splats and fields
    "gsworkbench.splat": 3,
    "gsworkbench.field": 3,
    "gsworkbench.transforms": 3,
    "gsworkbench.io.spz": 3,  # the .spz writer turns splats into SPZ's axes with transforms
    # 4 workflows
    "gsworkbench.train": 4,
    "gsworkbench.viewer": 4,
    "gsworkbench.profiling": 4,
    "gsworkbench.bench": 4,
    "gsworkbench.bench.ceilings": 4,  # the machine's roofline ceilings, which every benchmark run records
    "gsworkbench.bench.roofline": 4,
    "gsworkbench.bench.roofline_table": 4,
    "gsworkbench.experiments": 4,
    "gsworkbench.notebooks": 4,  # the notebooks' helpers and headless runner: sweeps run notebooks
    # 5 the entry point
    "gsworkbench.cli": 5,
}


def module_names(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``package_dir`` (a package's ``__init__.py``
    is the package's own name)."""
    out = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def module_imports(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its file). ``from P import X`` counts as
    an import of ``P.X`` when that is a module, else of ``P``; relative imports are resolved."""
    modules = module_names(package_dir)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    targets.add(full if full in modules else source)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None when the graph has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def layer_of(module: str, layers: dict[str, int]) -> int:
    """The layer of the longest prefix of ``module`` in ``layers``; KeyError when none matches."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in layers:
            return layers[prefix]
    raise KeyError(module)


def upward_imports(graph: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """Each import that goes from a lower layer to a higher one, as ``a (layer i) -> b (layer j)``."""
    return [f"{a} (layer {layer_of(a, layers)}) -> {b} (layer {layer_of(b, layers)})"
            for a in sorted(graph) for b in sorted(graph[a])
            if layer_of(b, layers) > layer_of(a, layers)]  # fmt: skip


# ---- the package -----------------------------------------------------------------------------------


def test_every_module_has_a_layer():
    unplaced = []
    for name in module_names(PACKAGE_DIR):
        try:
            layer_of(name, LAYERS)
        except KeyError:
            unplaced.append(name)
    assert not unplaced, f"modules missing from the layer table (tests/test_layering.py LAYERS): {unplaced}"


def test_no_import_cycle():
    cycle = find_cycle(module_imports(PACKAGE_DIR))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_goes_up_the_layers():
    upward = upward_imports(module_imports(PACKAGE_DIR), LAYERS)
    assert not upward, "imports up the layer table:\n" + "\n".join(upward)


def test_the_table_in_the_docs_matches():
    design = (PACKAGE_DIR.parent / "docs" / "design.md").read_text(encoding="utf-8")
    for module, layer in LAYERS.items():
        assert f"| `{module}` | {layer} |" in design, f"docs/design.md's layer table lacks {module} (layer {layer})"


# ---- the checker itself, on a small made-up package ---------------------------------------------


def _make_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_checker_finds_a_cycle_through_a_function_level_import(tmp_path):
    pkg = _make_package(tmp_path, {
        "low.py": "def f():\n    from pkg.sub import high\n    return high\n",
        "sub/__init__.py": "",
        "sub/high.py": "from .. import low\n",
        "other.py": "import pkg.low\n",
    })  # fmt: skip
    graph = module_imports(pkg)
    assert graph["pkg.low"] == {"pkg.sub.high"} and graph["pkg.sub.high"] == {"pkg.low"}
    assert graph["pkg.other"] == {"pkg.low"}
    cycle = find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"pkg.low", "pkg.sub.high"}


def test_checker_passes_a_package_without_cycles_and_flags_an_upward_import(tmp_path):
    pkg = _make_package(tmp_path, {"base.py": "import os\n", "top.py": "from pkg.base import x\n"})
    graph = module_imports(pkg)
    assert find_cycle(graph) is None
    assert upward_imports(graph, {"pkg": 1, "pkg.base": 1, "pkg.top": 2}) == []
    assert upward_imports(graph, {"pkg": 1, "pkg.base": 2, "pkg.top": 1}) == ["pkg.top (layer 1) -> pkg.base (layer 2)"]
    with pytest.raises(KeyError):
        layer_of("elsewhere.mod", {"pkg": 1})
