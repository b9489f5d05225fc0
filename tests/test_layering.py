"""The package's house structure: one package per layer, imports only downwards, no import cycle.

Every sub-package of ``gsworkbench`` is one layer of the table below (the root holds only ``__init__``,
``_ext`` and ``_libz``). A module may import modules of its own package or of a package in a lower
layer. Every ``import`` and ``from ... import`` of every module counts, those inside functions too (a
lazy import still ties two modules together). Checked: no upward import, no cycle between modules, and
no cycle between packages (the package graph is the module graph with each module replaced by its
package, so a cycle that runs through four packages by four different modules is one too). The table is
also in docs/design.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "gsworkbench"

# Package -> layer, bottom (0) to top; every package has a layer of its own.
LAYERS = {
    "gsworkbench": 0,  # the root: __init__, the extension's loader and the libz preload only
    "gsworkbench.core": 1,  # foundations: atomic writes, cameras, Gaussian math, SplatSet, limits, runs
    "gsworkbench.transforms": 2,
    "gsworkbench.splat": 3,
    "gsworkbench.field": 4,
    "gsworkbench.io": 5,  # the .spz writer turns splats into SPZ's axes with transforms
    "gsworkbench.scenes": 6,
    "gsworkbench.sfm": 7,  # photos to poses
    "gsworkbench.synthetic": 8,  # the built-in scenes: generated, then read by the loaders of scenes
    "gsworkbench.train": 9,
    "gsworkbench.viewer": 10,
    "gsworkbench.capture": 11,  # photos to a splat to orbit: sfm, train and viewer in one workflow
    "gsworkbench.bench": 12,  # the benchmark engine
    "gsworkbench.profiling": 13,
    "gsworkbench.studies": 14,  # the suites, the table scripts, quality and converge
    "gsworkbench.jupyter": 15,  # the notebooks' helpers, headless runner and sweeps
    "gsworkbench.cli": 16,
}
ROOT_MODULES = {"gsworkbench", "gsworkbench._ext", "gsworkbench._libz"}


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


def package_of(module: str, layers: dict[str, int]) -> str:
    """The package of ``module`` in ``layers``: its top-level sub-package (``a.b`` of ``a.b.c.d``), or
    the root ``a`` for the root's own modules (``a``, ``a.x``); KeyError when that is not in ``layers``."""
    parts = module.split(".")
    if len(parts) >= 2 and ".".join(parts[:2]) in layers:
        return ".".join(parts[:2])
    if len(parts) <= 2 and parts[0] in layers:
        return parts[0]
    raise KeyError(module)


def package_imports(graph: dict[str, set[str]], layers: dict[str, int]) -> dict[str, set[str]]:
    """The package graph of a module graph: package -> the other packages its modules import."""
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        pa = package_of(a, layers)
        out.setdefault(pa, set()).update(pb for pb in (package_of(b, layers) for b in targets) if pb != pa)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of a directed graph as ``[a, b, ..., a]``, or None when the graph has none."""
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


def upward_imports(graph: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """Each import from a package to a package of a higher layer, as ``a (layer i) -> b (layer j)``."""
    out = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            la, lb = layers[package_of(a, layers)], layers[package_of(b, layers)]
            if lb > la:
                out.append(f"{a} (layer {la}) -> {b} (layer {lb})")
    return out


# ---- the package -----------------------------------------------------------------------------------


def test_every_module_belongs_to_a_package_of_the_table():
    unplaced = []
    for name in module_names(PACKAGE_DIR):
        try:
            package = package_of(name, LAYERS)
        except KeyError:
            unplaced.append(name)
            continue
        if package == "gsworkbench" and name not in ROOT_MODULES:
            unplaced.append(name)  # a loose module in the root, or a sub-package missing from the table
    assert not unplaced, f"modules outside the table's packages (tests/test_layering.py LAYERS): {unplaced}"


def test_every_package_has_a_layer_of_its_own():
    assert sorted(LAYERS.values()) == list(range(len(LAYERS)))
    subpackages = {f"gsworkbench.{p.parent.name}" for p in PACKAGE_DIR.glob("*/__init__.py")}
    assert subpackages == set(LAYERS) - {"gsworkbench"}


def test_no_import_cycle_between_modules():
    cycle = find_cycle(module_imports(PACKAGE_DIR))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_between_packages():
    cycle = find_cycle(package_imports(module_imports(PACKAGE_DIR), LAYERS))
    assert cycle is None, "package import cycle: " + " -> ".join(cycle or [])


def test_no_import_goes_up_the_layers():
    upward = upward_imports(module_imports(PACKAGE_DIR), LAYERS)
    assert not upward, "imports up the layer table:\n" + "\n".join(upward)


def test_every_import_of_the_package_names_a_module_that_exists():
    """An import of a moved or renamed module (one inside a function too) fails only when it runs: the
    package, its tests and the notebooks' sources import only modules that exist."""
    modules = set(module_names(PACKAGE_DIR)) | {"gsworkbench._C"}
    root = PACKAGE_DIR.parent
    missing = []
    sources = [*PACKAGE_DIR.rglob("*.py"), *(root / "tests").rglob("*.py"), *(root / "notebooks").glob("*.py")]
    for path in sorted(sources):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            missing += [f"{path.relative_to(root)}:{node.lineno} {n}" for n in names
                        if (n == "gsworkbench" or n.startswith("gsworkbench.")) and n not in modules]  # fmt: skip
    assert not missing, f"imports of modules that do not exist: {missing}"


def test_the_table_in_the_docs_matches():
    design = (PACKAGE_DIR.parent / "docs" / "design.md").read_text(encoding="utf-8")
    for package, layer in LAYERS.items():
        assert f"| {layer} | `{package}` |" in design, f"docs/design.md's layer table lacks {package} (layer {layer})"


# ---- the checker itself, on small made-up packages and graphs ------------------------------------


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


def test_checker_finds_a_package_cycle_that_no_module_cycle_shows(tmp_path):
    """Three packages importing around a circle, each by a different module (one inside a function):
    the module graph has no cycle, the package graph has one."""
    pkg = _make_package(tmp_path, {
        "a/__init__.py": "", "a/x.py": "from pkg.b import y\n", "a/w.py": "",
        "b/__init__.py": "", "b/y.py": "", "b/z.py": "def f():\n    from pkg.c import v\n",
        "c/__init__.py": "", "c/v.py": "", "c/u.py": "import pkg.a.w\n",
    })  # fmt: skip
    layers = {"pkg": 0, "pkg.a": 1, "pkg.b": 2, "pkg.c": 3}
    graph = module_imports(pkg)
    assert find_cycle(graph) is None
    assert package_imports(graph, layers) == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    cycle = find_cycle(package_imports(graph, layers))
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"pkg.a", "pkg.b", "pkg.c"}


def test_checker_catches_the_old_bench_experiments_notebooks_profiling_cycle():
    """The cycle the module check missed: bench -> experiments -> notebooks -> profiling -> bench, by
    four modules that form no module cycle."""
    graph = {
        "gsworkbench.bench.suites.converge": {"gsworkbench.experiments.converge"},
        "gsworkbench.experiments.converge": set(),
        "gsworkbench.experiments.sweep": {"gsworkbench.notebooks.runner"},
        "gsworkbench.notebooks.runner": set(),
        "gsworkbench.notebooks.display": {"gsworkbench.profiling.stages"},
        "gsworkbench.profiling.stages": set(),
        "gsworkbench.profiling.compare": {"gsworkbench.bench.compare"},
        "gsworkbench.bench.compare": set(),
    }
    layers = {"gsworkbench": 0, "gsworkbench.bench": 1, "gsworkbench.experiments": 2, "gsworkbench.notebooks": 3,
              "gsworkbench.profiling": 4}  # fmt: skip
    assert find_cycle(graph) is None
    cycle = find_cycle(package_imports(graph, layers))
    assert cycle == ["gsworkbench.bench", "gsworkbench.experiments", "gsworkbench.notebooks", "gsworkbench.profiling",
                     "gsworkbench.bench"]  # fmt: skip
    assert upward_imports(graph, layers) == [
        "gsworkbench.bench.suites.converge (layer 1) -> gsworkbench.experiments.converge (layer 2)",
        "gsworkbench.experiments.sweep (layer 2) -> gsworkbench.notebooks.runner (layer 3)",
        "gsworkbench.notebooks.display (layer 3) -> gsworkbench.profiling.stages (layer 4)",
    ]


def test_checker_passes_a_package_without_cycles_and_flags_an_upward_import(tmp_path):
    pkg = _make_package(tmp_path, {
        "base/__init__.py": "", "base/m.py": "import os\n",
        "top/__init__.py": "", "top/m.py": "from pkg.base.m import x\n",
    })  # fmt: skip
    graph = module_imports(pkg)
    layers = {"pkg": 0, "pkg.base": 1, "pkg.top": 2}
    assert find_cycle(graph) is None and find_cycle(package_imports(graph, layers)) is None
    assert upward_imports(graph, layers) == []
    swapped = {"pkg": 0, "pkg.base": 2, "pkg.top": 1}
    assert upward_imports(graph, swapped) == ["pkg.top.m (layer 1) -> pkg.base.m (layer 2)"]
    assert package_of("pkg", {"pkg": 0}) == package_of("pkg.loose", {"pkg": 0}) == "pkg"
    with pytest.raises(KeyError):
        package_of("elsewhere.mod", {"pkg": 0})
    with pytest.raises(KeyError):
        package_of("pkg.unlisted.mod", {"pkg": 0})
