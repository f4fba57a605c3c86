"""The import graph, read from the source (AST): the package's parts import downhill only.

A part is a top-level module or subpackage of ``flashfleet`` (``stack``, ``planning``, ``launch``,
``bench``...). Every import counts, including those inside functions and under TYPE_CHECKING:
a lazy import is still a dependency. See docs/architecture.md for the picture.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "flashfleet"
# The spec is the bottom: besides itself it may import the catalog, nothing else of flashfleet.
SPEC_MAY_IMPORT = {"stack", "catalog"}


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = PACKAGE) -> Iterator[str]:
    """Absolute names of the flashfleet modules (or packages) a file imports."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            yield name
            # `from flashfleet.stack import spec` imports the module flashfleet.stack.spec
            yield from (f"{name}.{alias.name}" for alias in node.names)


def part_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "flashfleet" or len(parts) < 2 or parts[1] == "__version__":
        return None
    return parts[1]


def part_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        src = part_of(module_name(path, root))
        if src is None:
            continue
        deps = graph.setdefault(src, set())
        for imported in imported_modules(path, root):
            dst = part_of(imported)
            if dst is not None and dst != src and _exists(root, dst):
                deps.add(dst)
    return graph


def _exists(root: Path, part: str) -> bool:
    return (root / part).is_dir() or (root / f"{part}.py").is_file()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            scc = []
            while True:
                top = stack.pop()
                scc.append(top)
                if top == node:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def spec_violations(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted((root / "stack").rglob("*.py")):
        parts = {part_of(imported) for imported in imported_modules(path, root)}
        for part in sorted(
            p for p in parts if p is not None and p not in SPEC_MAY_IMPORT and _exists(root, p)
        ):
            found.append(f"{path.relative_to(root.parent)} imports flashfleet.{part}")
    return found


def test_no_cycle_between_the_packages_parts() -> None:
    assert cycles(part_graph()) == []


def test_the_spec_imports_only_the_catalog() -> None:
    assert spec_violations() == []


def test_the_layers_import_downhill() -> None:
    graph = part_graph()
    # Each listed part must not reach the ones after the arrow, directly or not.
    forbidden = {
        "stack": {"planning", "launch", "components", "k8s", "bench", "bringup", "recipes", "sizing"},
        "catalog": set(graph) - {"catalog"},
        "planning": {"components", "bringup", "bench", "cli", "inventory"},
        "bringup": {"bench", "components", "planning", "cli"},
    }

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    assert {part: sorted(reach(part) & banned) for part, banned in forbidden.items()} == {
        part: [] for part in forbidden
    }


# The checker itself must see what it is meant to see: a cycle and an upward import, written to a
# throwaway package tree, are found (including a lazy import inside a function).


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "flashfleet"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize("lazy", [False, True])
def test_a_cycle_is_found(tmp_path: Path, lazy: bool) -> None:
    back = "def f():\n    from flashfleet.a import x\n" if lazy else "from flashfleet.a import x\n"
    root = _tree(
        tmp_path, {"a/__init__.py": "from flashfleet.b import y\n", "b/__init__.py": back, "c.py": ""}
    )
    assert cycles(part_graph(root)) == [["a", "b"]]


def test_an_upward_import_from_the_spec_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "stack/__init__.py": "",
            "stack/spec.py": "from . import kubernetes\nfrom ..bench import gate\nfrom flashfleet.catalog import x\n",
            "stack/kubernetes.py": "",
            "bench/__init__.py": "",
            "bench/gate.py": "",
            "catalog/__init__.py": "",
        },
    )
    assert spec_violations(root) == ["flashfleet/stack/spec.py imports flashfleet.bench"]
