"""The package's shape: no import cycle, no import from a layer above, no Dagster in the core.

The graph is read from the source (every import statement, also inside functions and under
TYPE_CHECKING), so a lazy import cannot hide a cycle or a back-arrow.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "candlefire_pipeline"
ROOT = "candlefire_pipeline"

#: Bottom to top: a module may import from its own part or from a part listed before it.
LAYERS = [
    {"stores", "redact", "fsutil", "progress"},
    {"settings"},
    {"corpus"},
    {"embedding"},
    {"generations"},
    {"backends"},
    {"retrieval"},
    {"parity"},
    {"operations"},
    {"app"},  # the candle-fire app's collection (chromadb-compatible, on the serving store)
    {"demo_story"},
    {"defs"},
    {"definitions"},
    {"cli_generations"},  # `generation build` loads the code location to run its job
    {"cli_serving"},  # rollback, promote, retire, unretire: the verbs that move the switch
    {"cli_adopt"},  # adopt report, import, status: the app's own collection
    {"cli_replica"},  # replica create, start, stop, status, remove: the app's read replica
    {"cli_backup"},  # backup enable, take, list; restore: the embedded Postgres
    {"cli"},
]
#: The Dagster layer: every other module must import without loading dagster.
DAGSTER_PARTS = {"defs", "definitions"}
#: Store drivers take plain parameters; the app maps its settings onto them (backends/factory).
DRIVERS = ("backends.pg", "backends.chroma", "backends.qdrant", "backends.memory")


def module_name(path: Path) -> str:
    parts = [ROOT, *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """Project modules `path` imports (a `from pkg import mod` counts as importing pkg.mod)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(ROOT)}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(ROOT):
            submodules = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
            found |= submodules or {node.module}
    return found


GRAPH = {name: imports_of(path) & MODULES.keys() for name, path in MODULES.items()}


def part(module: str) -> str:
    """The top-level part of the package a module belongs to (`backends`, `cli`, ...)."""
    return module.split(".")[1] if "." in module else ""


def rank(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if part(module) in layer)


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != ROOT and not any(part(m) in layer for layer in LAYERS)] == []


def test_there_is_no_import_cycle():
    cycles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(GRAPH[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in GRAPH[node]:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


def test_no_module_imports_from_a_layer_above_it():
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in GRAPH.items()
        for target in targets
        if source != ROOT and part(source) != part(target) and rank(target) >= rank(source)
    )
    assert upward == []


def test_store_drivers_never_read_the_apps_settings():
    reading = sorted(
        f"{source} -> {target}"
        for source, targets in GRAPH.items()
        if source.removeprefix(f"{ROOT}.").startswith(DRIVERS)
        for target in targets
        if part(target) == "settings"
    )
    assert reading == []


def test_the_graph_sees_lazy_imports():
    """A function-level import is an edge like any other (the cli imports defs only lazily)."""
    assert f"{ROOT}.defs.drop_registration" in GRAPH[f"{ROOT}.cli"]


def test_the_core_imports_without_dagster():
    """Every module outside the Dagster layer, imported in a fresh interpreter."""
    core = sorted(m for m in MODULES if m != ROOT and part(m) not in DAGSTER_PARTS)
    script = (
        "import importlib, sys\n"
        f"for name in {core!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    assert len(core) > 80  # the walk found the package, not an empty list


#: Parts whose modules come in families (serving, shadow, generations, ...).
FAMILY_PARTS = ("operations", "parity", "defs")


def test_a_family_of_three_modules_is_a_package():
    """Flat modules sharing a name prefix are a package that was never made."""
    crowded = {}
    for part_name in FAMILY_PARTS:
        flat = [p.stem for p in (PACKAGE / part_name).glob("*.py") if p.stem != "__init__"]
        prefixes = [stem.split("_")[0] for stem in flat]
        crowded |= {
            f"{part_name}/{prefix}_*": prefixes.count(prefix)
            for prefix in set(prefixes)
            if prefixes.count(prefix) >= 3
        }
    assert crowded == {}


def test_every_family_package_names_what_it_owns_and_its_entry():
    """Each family's __init__ docstring says what it owns and names an entry module it holds."""
    families = [
        p.parent for part_name in FAMILY_PARTS for p in (PACKAGE / part_name).glob("*/__init__.py")
    ]
    assert len(families) >= 8
    for family in families:
        doc = ast.get_docstring(ast.parse((family / "__init__.py").read_text())) or ""
        entry = doc.split("Entry: `", 1)[-1].split("`", 1)[0] if "Entry: `" in doc else ""
        assert (family / f"{entry}.py").is_file(), f"{family.name}: no entry module in {doc!r}"


def test_every_folder_of_the_package_is_a_package():
    """No namespace package: each folder has an __init__ (its docstring says what it owns)."""
    folders = [p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    assert [str(f.relative_to(PACKAGE)) for f in folders if not (f / "__init__.py").is_file()] == []
