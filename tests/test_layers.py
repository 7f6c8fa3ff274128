"""Layers that only point down: every import inside ``src/tether`` goes to its own layer or
one below, and the module import graph has no cycles.

The map below is the architecture, not a description of today's tree: a new module must
be placed in it. Imports are read with :mod:`ast` (nothing is imported), and every one
counts: top level, inside functions, under ``if TYPE_CHECKING:`` (a type-only import of
the facade from below still means the code below drives the facade), relative or
absolute. The package root ``tether`` is the public face; only ``tether/__init__.py``
may import from it.
"""

from __future__ import annotations

import ast
import shutil
from collections import deque
from collections.abc import Callable
from pathlib import Path

import pytest

Graph = dict[str, set[str]]
Rule = Callable[[Graph], list[str]]

SRC = Path(__file__).resolve().parent.parent / "src" / "tether"
ROOT = "tether"

#: Bottom to top. A module belongs to the layer of the longest prefix naming it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("tether.errors", "tether.models", "tether.settings", "tether.text",
                "tether.tags", "tether.sanitize")),
    ("store", ("tether.store",)),
    ("ingest/embed/llm", ("tether.ingest", "tether.embed", "tether.llm", "tether.testing")),
    ("retrieve", ("tether.retrieve",)),
    ("facade", ("tether._tether", "tether._indexing", "tether._catalog")),
    ("shells", ("tether.policy", "tether.graph", "tether.cli", "tether.eval", "tether.server",
                ROOT)),
)  # fmt: skip


def layer_of(module: str) -> int | None:
    """The index in LAYERS of ``module``, or None when no prefix names it. The root
    prefix names the package itself only, not everything below it."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            named = module == prefix or (prefix != ROOT and module.startswith(prefix + "."))
            if named and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def layer_name(index: int) -> str:
    return f"{index} {LAYERS[index][0]}"


# -- the graph ----------------------------------------------------------------------------


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``package_dir`` (a package's
    name is its ``__init__.py``)."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_modules(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file.

    ``from pkg import name`` names the submodule ``pkg.name`` when there is one, else
    ``pkg``. Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``; those
    implicit parents are not counted (they would put every submodule in a cycle with a
    package that re-exports it).
    """
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.module, node.level)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
    root = module.split(".")[0]
    return {
        _nearest_known(name, known) for name in found if name == root or name.startswith(root + ".")
    }


def _absolute(module: str, is_package: bool, name: str | None, level: int) -> str:
    if level == 0:
        return name or ""
    parts = module.split(".")
    # ``from . import x`` in a package's __init__ is relative to the package itself.
    keep = len(parts) - level + (1 if is_package else 0)
    return ".".join(parts[:keep] + ([name] if name else []))


def _nearest_known(name: str, known: set[str]) -> str:
    """``name`` when it is a module of the tree, else its nearest existing parent, else
    ``name`` itself (an import of a module that does not exist yet)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return name


def import_graph(package_dir: Path) -> Graph:
    """Module -> the package's modules it imports (itself excluded)."""
    files = module_files(package_dir)
    known = set(files)
    return {
        module: imported_modules(module, path, known) - {module} for module, path in files.items()
    }


# -- the rules ----------------------------------------------------------------------------


def unmapped_modules(graph: Graph) -> list[str]:
    names = set(graph) | {target for targets in graph.values() for target in targets}
    return [
        f"{name}: in no layer; add it to LAYERS in tests/test_layers.py"
        for name in sorted(names)
        if layer_of(name) is None
    ]


def root_imports(graph: Graph) -> list[str]:
    """Below the shells, nothing imports the package root: it loads the facade."""
    shells = len(LAYERS) - 1
    return [
        f"{module} -> {ROOT} (the package root loads the facade; import from the module"
        " that defines the name)"
        for module in sorted(graph)
        if module != ROOT and ROOT in graph[module] and (layer_of(module) or 0) < shells
    ]


def facade_imports(graph: Graph) -> list[str]:
    """Shells reach the facade by its public names (``from tether import Tether``): only
    the package root and the facade itself import the private modules that make it."""
    facade = dict(LAYERS)["facade"]
    return [
        f"{module} -> {target} (a private module: import public names from {ROOT})"
        for module in sorted(graph)
        if module != ROOT and module not in facade
        for target in sorted(graph[module] & set(facade))
    ]


def upward_imports(graph: Graph) -> list[str]:
    found = []
    for module in sorted(graph):
        below = layer_of(module)
        for target in sorted(graph[module] - {ROOT}):
            above = layer_of(target)
            if below is not None and above is not None and above > below:
                found.append(f"{module} -> {target} ({layer_name(below)} -> {layer_name(above)})")
    return found


def import_cycles(graph: Graph) -> list[str]:
    """One shortest cycle per strongly connected component, from its first module, and
    the component's other modules (each lies on some cycle through it)."""
    found = []
    for component in _strongly_connected(graph):
        if len(component) > 1:
            start = min(component)
            cycle = _shortest_cycle(graph, start, component)
            line = "import cycle: " + " -> ".join([*cycle, start])
            others = sorted(component - set(cycle))
            if others:
                line += f" (the same knot also holds {', '.join(others)})"
            found.append(line)
    return sorted(found)


def _strongly_connected(graph: Graph) -> list[set[str]]:
    """Tarjan's algorithm (recursive: the graph has a few dozen modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _shortest_cycle(graph: Graph, start: str, component: set[str]) -> list[str]:
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph.get(node, set()) & component):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return path[::-1]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise AssertionError(f"{start} is in a component but on no cycle")


def violations(graph: Graph) -> list[str]:
    return [
        *unmapped_modules(graph),
        *root_imports(graph),
        *facade_imports(graph),
        *upward_imports(graph),
        *import_cycles(graph),
    ]


# -- the tests ----------------------------------------------------------------------------


def test_the_library_has_only_downward_imports_and_no_cycles() -> None:
    found = violations(import_graph(SRC))
    assert found == [], "layering violations:\n" + "\n".join(found)


def planted_tree(tmp_path: Path, plants: dict[str, str]) -> Path:
    """A copy of the package with ``code`` appended to each file named in ``plants``
    (created when missing)."""
    package = tmp_path / ROOT
    shutil.copytree(SRC, package, ignore=shutil.ignore_patterns("__pycache__"))
    for relative, code in plants.items():
        target = package / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        existing = target.read_text(encoding="utf-8") if target.exists() else ""
        target.write_text(existing + "\n" + code, encoding="utf-8")
    return package


@pytest.mark.parametrize(
    ("plants", "rule", "expected"),
    [
        pytest.param(
            {"store/__init__.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
             "    from tether._tether import Tether\n"},
            upward_imports,
            "tether.store -> tether._tether (1 store -> 4 facade)",
            id="type-only-import-of-the-facade",
        ),
        pytest.param(
            {"models.py": "import tether.graph\n"},
            upward_imports,
            "tether.models -> tether.graph (0 ground -> 5 shells)",
            id="plain-import",
        ),
        pytest.param(
            {"errors.py": "def _late() -> None:\n    from tether.retrieve import fusion\n"},
            upward_imports,
            "tether.errors -> tether.retrieve.fusion (0 ground -> 3 retrieve)",
            id="import-of-a-submodule-inside-a-function",
        ),
        pytest.param(
            {"store/__init__.py": "from ..ingest import chunking\n"},
            upward_imports,
            "tether.store -> tether.ingest.chunking (1 store -> 2 ingest/embed/llm)",
            id="relative-import-from-a-package",
        ),
        pytest.param(
            {"ingest/_plant.py": "from tether import Tether\n"},
            root_imports,
            "tether.ingest._plant -> tether (the package root loads the facade; import from"
            " the module that defines the name)",
            id="import-of-the-package-root-below-the-shells",
        ),
        pytest.param(
            {"server/__init__.py": "from tether._tether import Tether\n"},
            facade_imports,
            "tether.server -> tether._tether (a private module: import public names from"
            " tether)",
            id="a-shell-importing-the-private-facade-module",
        ),
        pytest.param(
            {"store/_plant_a.py": "from tether.store import _plant_b\n",
             "store/_plant_b.py": "from . import _plant_a\n"},
            import_cycles,
            "import cycle: tether.store._plant_a -> tether.store._plant_b"
            " -> tether.store._plant_a",
            id="cycle-within-a-layer",
        ),
        pytest.param(
            {"unplaced.py": ""},
            unmapped_modules,
            "tether.unplaced: in no layer; add it to LAYERS in tests/test_layers.py",
            id="module-in-no-layer",
        ),
    ],
)  # fmt: skip
def test_a_planted_violation_is_reported(
    tmp_path: Path, plants: dict[str, str], rule: Rule, expected: str
) -> None:
    """Whatever the tree holds today, the plant adds exactly one finding of its kind."""
    before = set(rule(import_graph(SRC)))
    graph = import_graph(planted_tree(tmp_path, plants))
    assert set(rule(graph)) - before == {expected}
    assert expected in violations(graph)
