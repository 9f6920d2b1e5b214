"""The KB package stays small and acyclic: no import circle between its modules, no god-module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

KB = Path(__file__).resolve().parent.parent / "deepresearch" / "kb"


def _kb_imports(path: Path) -> set[str]:
    """Every deepresearch.kb module `path` imports, TYPE_CHECKING and function-level imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "deepresearch.kb":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("deepresearch.kb."):
            found.add(node.module.split(".")[2])  # type: ignore[union-attr]
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("deepresearch.kb.")}
    return found - {path.stem}


def test_no_import_circle_between_kb_modules() -> None:
    graph = {p.stem: _kb_imports(p) for p in KB.glob("*.py")}
    assert set().union(*graph.values()) <= set(graph), "an import names a kb module that does not exist"
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for dep in sorted(graph[module]):
            assert dep not in path, f"import circle: {' -> '.join([*path, dep])}"
            if dep not in done:
                visit(dep, [*path, dep])
        done.add(module)

    for module in sorted(graph):
        visit(module, [module])
    assert "repository" in graph["store"] and "store" not in graph["repository"]  # the graph is really read


def test_kb_modules_stay_small() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in KB.glob("*.py")}
    assert sizes["store.py"] < 450
    assert {name: n for name, n in sizes.items() if n > 500} == {}


# SQL naming the facts table: `from facts`, `join facts`, `into facts`, `update facts`, `on facts(`, …
FACTS_SQL = re.compile(r"(?i)\b(from|into|update|join|on|table)\s+facts\b(?!\w)")


def test_sql_on_the_facts_table_lives_in_the_repository_and_migrations() -> None:
    package = KB.parent
    found = {
        str(p.relative_to(package.parent))
        for p in package.rglob("*.py")
        if FACTS_SQL.search(p.read_text(encoding="utf-8"))
    }
    assert "deepresearch/kb/repository.py" in found and "deepresearch/migrations.py" in found  # the pattern works
    assert found == {"deepresearch/kb/repository.py", "deepresearch/migrations.py"}
