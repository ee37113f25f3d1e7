"""The engine's modules import one another in one direction (no circle): a newcomer can read
a module knowing what it stands on, and a module loads without half-initialised partners.
Read with the standard library's ast, every import counted (those inside functions too)."""
import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "engine"


def _module(path: Path) -> str:
    parts = path.relative_to(ENGINE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = ENGINE) -> dict[str, set[str]]:
    """module -> the modules of `root`'s package it imports (a package's __init__ counts as the
    package: `from . import x` of a submodule x is an import of x)."""
    files = {_module(p): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in files)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for a in node.names:
                    deps.add(f"{target}.{a.name}" if f"{target}.{a.name}" in files else target)
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_engine_has_no_import_circle():
    assert circles(import_graph()) == []


def test_the_engine_does_not_import_training():
    """training depends on the engine, not the other way round: its commands reach `sinew`
    through the entry points "sinew.commands" (engine/cli.py), and the Blender extension ships
    the engine alone."""
    named = []
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            named += [f"{path.relative_to(ENGINE.parent)}: {n}" for n in names if n.split(".")[0] == "training"]
    assert named == []


def test_sinew_lists_trainings_commands_through_its_entry_points():
    from engine.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {"train", "export-policy", "simulate", "bake"} <= set(sub.choices)


def test_the_circle_finder_finds_a_circle():
    """The check above could fail: the finder sees a planted circle and a package's
    `from . import x`."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    real = import_graph()
    assert "engine.control.tracking" in real["engine.control.balance"]  # balance builds on the tracker
    assert "engine.control.stand" in real["engine.control.factory"]  # imports inside functions count
