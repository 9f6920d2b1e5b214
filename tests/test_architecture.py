"""The package's imports keep the layers: no cycle between modules, nothing imports upward.

Imports are read from the source (module level and inside functions alike; only
`if TYPE_CHECKING:` blocks are left out, since they never run). A new module must be placed
in LAYERS, so where it sits is a decision, not an accident.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "deepresearch"

# Top to bottom. A module may import from its own layer or any layer below it.
# A name ending in ".*" covers a whole subpackage.
LAYERS: list[tuple[str, ...]] = [
    ("deepresearch.__main__", "deepresearch.cli.*", "deepresearch.mcp_server"),
    ("deepresearch.research.*", "deepresearch.views"),
    ("deepresearch.kb.*", "deepresearch.search.*", "deepresearch.doctor"),
    ("deepresearch.models.*", "deepresearch.workspace", "deepresearch.indexing"),
    ("deepresearch.config", "deepresearch.db", "deepresearch.prompts", "deepresearch.registry", "deepresearch.files"),
    (
        "deepresearch",
        "deepresearch.facts",
        "deepresearch.errors",
        "deepresearch.migrations",
        "deepresearch.text",
        "deepresearch.grounding",
        "deepresearch.deadline",
        "deepresearch.retry",
    ),
]


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules `path` imports, outside `if TYPE_CHECKING:` blocks."""
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names if alias.name in known)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level or not node.module or node.module not in known:
                return
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def layer_of(name: str) -> int | None:
    """The index in LAYERS of the entry that covers `name` (0 = top)."""
    for index, layer in enumerate(LAYERS):
        for entry in layer:
            if entry == name or (entry.endswith(".*") and (name + ".").startswith(entry[:-1])):
                return index
            if entry.endswith(".*") and name == entry[:-2]:
                return index
    return None


def graph() -> dict[str, set[str]]:
    """Module → the package modules it imports (itself and its own parent package left out)."""
    known = modules()
    edges = {}
    for name, path in known.items():
        edges[name] = {m for m in imports_of(path, known) if m != name and not name.startswith(m + ".")}
    return edges


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(name for name in modules() if layer_of(name) is None)
    assert unplaced == [], f"add these modules to LAYERS in {__file__}: {unplaced}"


def test_no_import_runs_up_a_layer() -> None:
    upward = []
    for name, targets in graph().items():
        here = layer_of(name)
        for target in targets:
            there = layer_of(target)
            if here is not None and there is not None and there < here:
                upward.append(f"{name} -> {target}")
    assert upward == [], "imports from a lower layer to a higher one:\n" + "\n".join(sorted(upward))


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycle() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_finder_finds_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_private_name_is_imported_from_another_module() -> None:
    """A leading underscore means "this module's own": another module may not import it (dunders are public)."""
    known = modules()
    crossings = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module in known and node.module != name:
                crossings += [
                    f"{name} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.endswith("__")
                ]
    assert crossings == [], "\n".join(sorted(crossings))


def test_cli_commands_close_nothing_themselves() -> None:
    """One way to close: cli/common.py's open_* register `ctx.call_on_close`; no command closes by hand."""
    by_hand = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        if path.name == "common.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "close":
                by_hand.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
            if isinstance(node, ast.Try) and node.finalbody:
                by_hand.append(f"{path.name}:{node.lineno} try/finally")
            if isinstance(node, ast.Attribute) and ast.unparse(node) in (
                "KnowledgeBase.from_workspace",
                "SearchCache.from_workspace",
            ):
                by_hand.append(f"{path.name}:{node.lineno} {ast.unparse(node)} (use open_kb/open_cache)")
    assert by_hand == [], "\n".join(by_hand)


def test_the_mcp_server_does_not_import_the_cli() -> None:
    """Two front ends over one library: their shared JSON shapes live in deepresearch/views.py."""
    from_cli = sorted(m for m in graph()["deepresearch.mcp_server"] if m.startswith("deepresearch.cli"))
    assert from_cli == [], from_cli


MAX_PARAMETERS = 7  # self and cls not counted; *args and **kwargs count one each
MAX_LINES = 60  # from `def` to the last line of the body, docstring included


def function_sizes() -> dict[str, tuple[int, int]]:
    """ "path::name" → (parameters, lines) of every function and method in the package."""
    sizes: dict[str, tuple[int, int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                count -= bool(a.args and a.args[0].arg in ("self", "cls"))
                key = f"{path.relative_to(PACKAGE).as_posix()}::{node.name}"
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                old = sizes.get(key, (0, 0))
                sizes[key] = (max(old[0], count), max(old[1], lines))
    return sizes


def test_no_function_takes_more_than_7_parameters_or_runs_over_60_lines() -> None:
    over = sorted(
        f"{key}: {params} parameters, {lines} lines"
        for key, (params, lines) in function_sizes().items()
        if params > MAX_PARAMETERS or lines > MAX_LINES
    )
    assert over == [], f"split these (at most {MAX_PARAMETERS} parameters, {MAX_LINES} lines):\n" + "\n".join(over)
