"""Layers that only point down: every import inside ``src/tether`` goes to its own layer or
one below, the module import graph has no cycles, and what is private stays private.

The map below is the architecture, not a description of today's tree: a new module must
be placed in it. Imports are read with :mod:`ast` (nothing is imported), and every one
counts: top level, inside functions, under ``if TYPE_CHECKING:`` (a type-only import of
the facade from below still means the code below drives the facade), relative or
absolute. The rules, each a function below that lists its violations:

(a) ``unmapped_modules``: every module lies in a layer of ``LAYERS``.
(b) ``upward_imports``: a module imports only from its own layer or the ones below.
(c) ``import_cycles``: the module import graph has no cycles.
(d) ``root_imports``: below the shells, nothing imports the package root ``tether`` (it
    loads the facade); the shells may, and use the public names it exports.
(e) ``facade_imports``: the private modules that make the facade (``tether._tether``,
    ``tether._indexing``, ``tether._catalog``) are imported only by the package root and
    by each other; the shells reach the facade through ``tether``.
(f) ``dynamic_imports``: no ``importlib.import_module`` or ``__import__``, however spelled
    (``from importlib import import_module``, an alias): rules (a)-(h) cannot see what
    such a call imports.
(g) ``private_imports``: a private name (``_name``, not a dunder) is seen only inside its
    package. ``from X import _name`` needs ``X`` in the importer's own package, and a
    module with a private part (``tether.store._rows``) is imported only from the package
    that holds that part (or from inside the private part). The package of a package's
    ``__init__`` is the package itself; of a plain module, its parent.
(h) ``store_internals``: ``tether.store.sqlite``, ``.database``, ``.migrations`` and
    ``tether.store._*`` are imported only inside ``tether.store``, by the facade and by
    the package root; everything else goes through the ``Store`` interface, its records
    and SQL builders in ``tether.store``.
"""

from __future__ import annotations

import ast
import shutil
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

Graph = dict[str, set[str]]

SRC = Path(__file__).resolve().parent.parent / "src" / "tether"
ROOT = "tether"

#: Bottom to top. A module belongs to the layer of the longest prefix naming it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("tether.errors", "tether.models", "tether.settings", "tether.text",
                "tether.tags", "tether.sanitize")),
    ("store", ("tether.store",)),
    ("ingest/embed/llm", ("tether.ingest", "tether.embed", "tether.llm", "tether.testing",
                          "tether.access")),
    ("retrieve", ("tether.retrieve",)),
    ("facade", ("tether._tether", "tether._indexing", "tether._catalog")),
    ("shells", ("tether.policy", "tether.graph", "tether.llamaindex", "tether.haystack",
                "tether._passages", "tether.cli", "tether.eval",
                "tether.server", ROOT)),
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


@dataclass(frozen=True)
class Tree:
    """What the rules read from the package's files."""

    #: Module -> the package's modules it imports (itself excluded).
    graph: Graph
    #: The modules that are packages (an ``__init__.py``).
    packages: frozenset[str]
    #: Module -> ``(X, name)`` for each ``from X import name`` of the package whose
    #: ``X.name`` is no module (those are edges of ``graph``).
    names: dict[str, set[tuple[str, str]]]
    #: Module -> ``(line, source)`` for each use of a dynamic importer.
    dynamic: dict[str, list[tuple[int, str]]]


Rule = Callable[[Tree], list[str]]


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


def imported_modules(module: str, is_package: bool, syntax: ast.AST, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file.

    ``from pkg import name`` names the submodule ``pkg.name`` when there is one, else
    ``pkg``. Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``; those
    implicit parents are not counted (they would put every submodule in a cycle with a
    package that re-exports it).
    """
    found: set[str] = set()
    for node in ast.walk(syntax):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.module, node.level)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
    return {_nearest_known(name, known) for name in found if _in_package(module, name)}


def imported_names(
    module: str, is_package: bool, syntax: ast.AST, known: set[str]
) -> set[tuple[str, str]]:
    """``(X, name)`` for each ``from X import name`` of the package that imports a name,
    not a submodule, with ``X`` resolved as in :func:`imported_modules`."""
    found = set()
    for node in ast.walk(syntax):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_package, node.module, node.level)
            if _in_package(module, base):
                found.update(
                    (_nearest_known(base, known), alias.name)
                    for alias in node.names
                    if f"{base}.{alias.name}" not in known
                )
    return found


#: ``(module, name)`` of the functions that import a module named at run time.
DYNAMIC_IMPORTERS = {("importlib", "import_module"), ("importlib", "__import__"),
                     ("builtins", "__import__")}  # fmt: skip


def dynamic_import_uses(syntax: ast.AST) -> list[tuple[int, str]]:
    """``(line, source)`` for each expression naming a dynamic importer, called or not:
    the builtin ``__import__``, an attribute ``import_module`` or ``__import__`` of
    anything (``importlib.import_module``, an alias of ``importlib``, ``builtins``), and
    a name bound by ``from importlib import import_module`` (under any alias)."""
    bound = {"__import__"}
    for node in ast.walk(syntax):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            bound.update(
                alias.asname or alias.name
                for alias in node.names
                if (node.module, alias.name) in DYNAMIC_IMPORTERS
            )
    attributes = {name for _, name in DYNAMIC_IMPORTERS}
    found = []
    for node in ast.walk(syntax):
        named = (isinstance(node, ast.Name) and node.id in bound) or (
            isinstance(node, ast.Attribute) and node.attr in attributes
        )
        if named and isinstance(getattr(node, "ctx", None), ast.Load):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def _in_package(module: str, name: str) -> bool:
    root = module.split(".")[0]
    return name == root or name.startswith(root + ".")


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


def import_tree(package_dir: Path) -> Tree:
    files = module_files(package_dir)
    known = set(files)
    graph: Graph = {}
    names: dict[str, set[tuple[str, str]]] = {}
    dynamic: dict[str, list[tuple[int, str]]] = {}
    for module, path in files.items():
        syntax = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[module] = imported_modules(module, is_package, syntax, known) - {module}
        names[module] = imported_names(module, is_package, syntax, known)
        dynamic[module] = dynamic_import_uses(syntax)
    packages = frozenset(module for module, path in files.items() if path.name == "__init__.py")
    return Tree(graph=graph, packages=packages, names=names, dynamic=dynamic)


# -- the rules ----------------------------------------------------------------------------


def unmapped_modules(tree: Tree) -> list[str]:
    graph = tree.graph
    names = set(graph) | {target for targets in graph.values() for target in targets}
    return [
        f"{name}: in no layer; add it to LAYERS in tests/test_layers.py"
        for name in sorted(names)
        if layer_of(name) is None
    ]


def root_imports(tree: Tree) -> list[str]:
    """Below the shells, nothing imports the package root: it loads the facade."""
    graph = tree.graph
    shells = len(LAYERS) - 1
    return [
        f"{module} -> {ROOT} (the package root loads the facade; import from the module"
        " that defines the name)"
        for module in sorted(graph)
        if module != ROOT and ROOT in graph[module] and (layer_of(module) or 0) < shells
    ]


def facade_imports(tree: Tree) -> list[str]:
    """Shells reach the facade by its public names (``from tether import Tether``): only
    the package root and the facade itself import the private modules that make it."""
    graph = tree.graph
    facade = dict(LAYERS)["facade"]
    return [
        f"{module} -> {target} (a private module: import public names from {ROOT})"
        for module in sorted(graph)
        if module != ROOT and module not in facade
        for target in sorted(graph[module] & set(facade))
    ]


def upward_imports(tree: Tree) -> list[str]:
    graph = tree.graph
    found = []
    for module in sorted(graph):
        below = layer_of(module)
        for target in sorted(graph[module] - {ROOT}):
            above = layer_of(target)
            if below is not None and above is not None and above > below:
                found.append(f"{module} -> {target} ({layer_name(below)} -> {layer_name(above)})")
    return found


def dynamic_imports(tree: Tree) -> list[str]:
    return [
        f"{module}:{line}: {source} (dynamic import: the layering test cannot see it)"
        for module in sorted(tree.dynamic)
        for line, source in tree.dynamic[module]
    ]


def private_imports(tree: Tree) -> list[str]:
    """A private name is seen only inside its package (its subpackages included: a
    backend's folder is part of the store): ``from X import _name`` needs ``X``'s
    package to hold the importer, and a module with a private part ``P._part`` is
    imported only from package ``P`` (or below it) or from inside ``P._part``."""
    found = []
    for module in sorted(tree.graph):
        home = package_of(module, tree.packages)
        for source, name in sorted(tree.names[module]):
            if _private(name) and not _within(home, package_of(source, tree.packages)):
                found.append(
                    f"{module} -> {source}.{name} (a private name of package"
                    f" {package_of(source, tree.packages)})"
                )
        for target in sorted(tree.graph[module]):
            parts = target.split(".")
            for index, part in enumerate(parts):
                holder, inside = ".".join(parts[:index]), ".".join(parts[: index + 1])
                seen = _within(home, holder) or _within(home, inside)
                if _private(part) and not seen:
                    found.append(f"{module} -> {target} (a private module of package {holder})")
                    break
    return found


def package_of(module: str, packages: frozenset[str]) -> str:
    """A package's ``__init__`` is in the package itself; a plain module in its parent."""
    return module if module in packages else module.rpartition(".")[0]


def _within(module: str, package: str) -> bool:
    """``module`` is ``package`` or lies below it."""
    return (module + ".").startswith(package + ".")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


#: Behind the Store interface: each backend's folder (the SQLite and PostgreSQL
#: implementations and their parts).
STORE = "tether.store"
STORE_INTERNALS = ("tether.store.sqlite", "tether.store.postgres")


def store_internals(tree: Tree) -> list[str]:
    """Only the store itself, the facade (which builds a store) and the package root
    import the store's implementation; everything else uses ``tether.store``."""
    allowed = {ROOT, *dict(LAYERS)["facade"]}
    return [
        f"{module} -> {target} (behind the Store interface: import from {STORE})"
        for module in sorted(tree.graph)
        if module not in allowed and not _within(module, STORE)
        for target in sorted(tree.graph[module])
        if _store_internal(target)
    ]


def _store_internal(module: str) -> bool:
    parts = module.split(".")
    if module.startswith(STORE + ".") and _private(parts[2]):
        return True
    return any(_within(module, name) for name in STORE_INTERNALS)


def import_cycles(tree: Tree) -> list[str]:
    """One shortest cycle per strongly connected component, from its first module, and
    the component's other modules (each lies on some cycle through it)."""
    graph = tree.graph
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


def violations(tree: Tree) -> list[str]:
    return [
        *unmapped_modules(tree),
        *root_imports(tree),
        *facade_imports(tree),
        *upward_imports(tree),
        *import_cycles(tree),
        *dynamic_imports(tree),
        *private_imports(tree),
        *store_internals(tree),
    ]


# -- the tests ----------------------------------------------------------------------------


def test_the_library_has_only_downward_imports_and_no_cycles() -> None:
    found = violations(import_tree(SRC))
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
            {"retrieve/_plant.py": "import importlib\n\nfusion = importlib.import_module("
             "'tether.retrieve.fusion')\n"},
            dynamic_imports,
            "tether.retrieve._plant:4: importlib.import_module (dynamic import: the layering"
            " test cannot see it)",
            id="importlib-import-module",
        ),
        pytest.param(
            {"ingest/_plant.py": "from importlib import import_module as load\n\n"
             "graph = load('tether.graph')\n"},
            dynamic_imports,
            "tether.ingest._plant:4: load (dynamic import: the layering test cannot see it)",
            id="import-module-imported-under-an-alias",
        ),
        pytest.param(
            {"embed/_plant.py": "def _late():\n    return __import__('tether.cli')\n"},
            dynamic_imports,
            "tether.embed._plant:3: __import__ (dynamic import: the layering test cannot see"
            " it)",
            id="builtin-import-inside-a-function",
        ),
        pytest.param(
            {"retrieve/_plant.py": "from tether.store.sql import _placeholders\n"},
            private_imports,
            "tether.retrieve._plant -> tether.store.sql._placeholders (a private name of"
            " package tether.store)",
            id="private-name-from-another-package",
        ),
        pytest.param(
            {"graph.py": "from tether.cli import _shell\n"},
            private_imports,
            "tether.graph -> tether.cli._shell (a private module of package tether.cli)",
            id="private-module-from-another-package",
        ),
        pytest.param(
            {"retrieve/_plant.py": "from tether.store.sqlite import SQLiteStore\n"},
            store_internals,
            "tether.retrieve._plant -> tether.store.sqlite (behind the Store interface:"
            " import from tether.store)",
            id="store-implementation-past-the-interface",
        ),
        pytest.param(
            {"ingest/_plant.py": "from ..store.sqlite import database\n"},
            store_internals,
            "tether.ingest._plant -> tether.store.sqlite.database (behind the Store interface:"
            " import from tether.store)",
            id="store-module-named-from-the-package",
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
    before = set(rule(import_tree(SRC)))
    tree = import_tree(planted_tree(tmp_path, plants))
    assert set(rule(tree)) - before == {expected}
    assert expected in violations(tree)


@pytest.mark.parametrize(
    "plants",
    [
        pytest.param({"retrieve/_plant.py": "from tether.store import Store, sql\n"},
                     id="the-store-interface"),
        pytest.param({"store/_plant.py": "from tether.store import _rows, sqlite\n"
                      "from tether.store.sql import _placeholders\n"},
                     id="store-internals-inside-the-store"),
        pytest.param({"_catalog.py": "from tether.store.sqlite import SQLiteStore\n"},
                     id="the-facade-builds-a-store"),
        pytest.param({"cli/_plant.py": "from tether.cli._shell import _COMMAND_HINTS\n"
                      "from tether import Tether\n"},
                     id="a-private-name-in-its-own-package-and-the-root-from-a-shell"),
    ],
)  # fmt: skip
def test_an_allowed_import_is_not_reported(tmp_path: Path, plants: dict[str, str]) -> None:
    """The rules are no stricter than the architecture: these plants add no finding."""
    before = set(violations(import_tree(SRC)))
    assert set(violations(import_tree(planted_tree(tmp_path, plants)))) - before == set()


def test_the_tests_mirror_the_packages() -> None:
    """Each folder of tests/ is a package of src/tether (its tests), or e2e/ (the whole
    product from outside: the browser console, the docs); the tests of the root modules
    (the facade, access, policy, settings, the layers) stay at the top."""
    tests = Path(__file__).resolve().parent
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert folders - {"e2e"} <= packages, folders - packages
    for folder in folders:
        assert list((tests / folder).glob("test_*.py")), f"tests/{folder} holds no tests"
