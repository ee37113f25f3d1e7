"""The engine's modules import one another in one direction (no circle): a newcomer can read
a module knowing what it stands on, and a module loads without half-initialised partners.
The command line (engine/commands) sits on top: no library module imports it, and only it
knows where the project's reference data lies (../shared). Read with the standard library's
ast, every import counted (those inside functions too)."""
import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENGINE = REPO / "engine"
COMMANDS = ENGINE / "commands"
# The command line: engine/commands, `python -m engine`, and training's commands (which reach
# `sinew` through the entry points "sinew.commands").
COMMAND_MODULES = {ENGINE / "__main__.py", REPO / "training" / "commands.py"}


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


def test_training_has_no_import_circle():
    """The task trainer once read the trainer's private window helpers and log writer while
    the trainer imported the task (issue 46): the buffer, its windows and the log now have
    their own modules."""
    assert circles(import_graph(REPO / "training")) == []


def test_the_engine_does_not_import_training():
    """training depends on the engine, not the other way round: its commands reach `sinew`
    through the entry points "sinew.commands" (engine/commands/main.py), and the Blender extension ships
    the engine alone."""
    named = []
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            named += [f"{path.relative_to(ENGINE.parent)}: {n}" for n in names if n.split(".")[0] == "training"]
    assert named == []


def test_sinew_lists_trainings_commands_through_its_entry_points():
    from engine.commands.main import build_parser

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


def library_modules() -> list[Path]:
    """The engine outside its command line, training outside its commands, and the add-on."""
    files = [*ENGINE.rglob("*.py"), *(REPO / "training").rglob("*.py"), *(REPO / "blender_addon").rglob("*.py")]
    return sorted(f for f in files if COMMANDS not in f.parents and f not in COMMAND_MODULES)


def imports_of_commands(path: Path, root: Path = REPO) -> list[str]:
    """The imports in `path` (a file under `root`) of the command-line package engine.commands:
    absolute (engine.commands...), relative from inside the engine (from ..commands, from ..
    import commands) or, in the add-on, of the engine it ships beside it (from .engine.commands)."""
    package = list(path.relative_to(root).parts[:-1])
    addon = package[:1] == ["blender_addon"]  # the add-on's `.engine` is the engine
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "").split(".") if node.module else []
            if node.level:
                base = package[: len(package) - node.level + 1] + base
                if addon:
                    base = base[1:]
            targets = [".".join(base + [a.name]) for a in node.names]
        else:
            continue
        found += [t for t in targets if t.split(".")[:2] == ["engine", "commands"]]
    return found


def test_only_the_command_line_imports_engine_commands():
    """engine/commands holds the command line and nothing else leans on it: the engine,
    training and the Blender add-on run without a parser (the add-on ships the engine; its
    batch script reads its flags through engine.options)."""
    named = [f"{f.relative_to(REPO)}: {t}" for f in library_modules() for t in imports_of_commands(f)]
    assert named == []


def test_the_commands_check_sees_an_import_of_the_command_line(tmp_path):
    """The check above could fail: it sees each way a module can import engine.commands, and
    a command module does import it."""
    planted = {
        "engine/take.py": "from .commands.simulate import write_outputs\n",
        "engine/motion/x.py": "def f():\n    from .. import commands\n",
        "training/trainer.py": "import engine.commands.main\n",
        "training/config.py": "from engine.commands import sample_data\n",
        "blender_addon/batch.py": "from .engine.commands.main import build_parser\n",
        "blender_addon/core.py": "from .engine import commands\n",
    }
    for rel, text in planted.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        assert imports_of_commands(f, tmp_path), rel
    fine = tmp_path / "engine" / "fine.py"
    fine.write_text("from .commands_of_a_kind import x\nfrom . import options\nfrom .motion import commands\n")
    assert imports_of_commands(fine, tmp_path) == []
    assert imports_of_commands(REPO / "training" / "commands.py")  # the train command finds the sample motion


# ../shared (the project's reference data) named as a path: "../shared", or "shared" as a
# string of its own ("shared" / "reference", os.path.join(..., "shared", ...)).
SHARED_PATH = re.compile(r"""\.\.[/\\]shared\b|(?<![\w$])(["'])shared\1""")


def test_no_library_module_reaches_into_shared():
    """Only the command line knows where the reference data lies (engine/commands/sample_data.py:
    $SINEW_MOTION_DIR or ../shared beside a checkout); library code takes the paths it is given."""
    named = [f"{f.relative_to(REPO)}:{n}: {line.strip()}" for f in library_modules()
             for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if SHARED_PATH.search(line)]
    assert named == []


def test_the_shared_check_sees_a_path_to_shared():
    hits = ['WALK = Path(__file__).resolve().parents[2] / "shared" / "reference" / "walk.bvh"',
            "MOTION = os.path.join(ROOT, 'shared', 'reference')", 'clip = "../shared/reference/mass/motion/walk.bvh"',
            "the token stands for ../shared/reference/mass/motion"]
    misses = ["self.shared_best = None", '"${shared_motion}/walk.bvh"', "# a shared machine", '"shared_memory"']
    assert all(SHARED_PATH.search(h) for h in hits)
    assert not any(SHARED_PATH.search(m) for m in misses)
    assert SHARED_PATH.search((COMMANDS / "sample_data.py").read_text())  # where the command line looks


# research/: the scripts behind docs/research/*.md, run by hand (research/README.md). They lean
# on the engine and training through public names only, and each still imports.
RESEARCH = REPO / "research"
PROJECT_PACKAGES = ("engine", "training")


def research_scripts() -> list[Path]:
    return sorted(RESEARCH.rglob("*.py"))


def project_names_used(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) for each name `path` takes from engine or training: `from M import
    name` (at any depth), and `alias.name` where alias is bound to an engine or training module
    by an import in that scope or one around it and not assigned there (a local of the same name
    is not the module)."""
    found = []

    def imports_in(body_nodes):
        """alias -> module of the imports directly in a scope (not in nested functions)."""
        out, assigned = {}, set()
        stack = list(body_nodes)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                if not isinstance(node, ast.Lambda):
                    assigned.add(node.name)
                continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in PROJECT_PACKAGES:
                        out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in PROJECT_PACKAGES:
                for a in node.names:
                    found.append((node.lineno, node.module, a.name))
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned.add(node.id)
            elif isinstance(node, ast.arg):
                assigned.add(node.arg)
            stack.extend(ast.iter_child_nodes(node))
        return out, assigned

    def visit(scope, outer: dict):
        body = scope.body if not isinstance(scope, ast.Lambda) else [scope.body]
        args = scope.args.args + scope.args.kwonlyargs if hasattr(scope, "args") else []
        own, assigned = imports_in(body)
        assigned |= {a.arg for a in args}
        aliases = {k: v for k, v in outer.items() if k not in assigned} | own
        stack = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(node, aliases)
                continue
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                found.append((node.lineno, aliases[node.value.id], node.attr))
            stack.extend(ast.iter_child_nodes(node))

    visit(ast.parse(path.read_text(encoding="utf-8")), {})
    return found


def test_research_scripts_use_only_public_engine_names():
    """Every name a research script takes from engine or training exists and is public (no
    leading underscore): the engine may rename its private helpers without breaking them."""
    import importlib
    import importlib.util

    bad = []
    for path in research_scripts():
        for line, module, name in project_names_used(path):
            where = f"{path.relative_to(REPO)}:{line}: {module}.{name}"
            if name.startswith("_") and not name.startswith("__"):
                bad.append(f"{where} is private")
                continue
            try:
                obj = importlib.import_module(module)
            except ImportError:  # module.attr where `module` is itself a name from a module
                parent, _, leaf = module.rpartition(".")
                obj = getattr(importlib.import_module(parent), leaf, None)
            exists = obj is not None and (hasattr(obj, name) or (
                hasattr(obj, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None))
            if not exists:
                bad.append(f"{where} does not exist")
    assert bad == []


def test_the_research_check_sees_a_private_name(tmp_path):
    """The check above could fail: it sees a private import, a private attribute of an imported
    module (at any depth) and leaves a local that shadows a module's alias alone."""
    f = tmp_path / "x.py"
    f.write_text("import engine.control.plan as plan_mod\nfrom engine.control.coordination import _EPS\n"
                 "def f():\n    return plan_mod._yaw\n"
                 "def g():\n    import engine.control.plan as plan\n    return plan.PHYSICS_HZ\n"
                 "def h(plan):\n    return plan.segments\n")
    names = {(m, n) for _, m, n in project_names_used(f)}
    assert {("engine.control.coordination", "_EPS"), ("engine.control.plan", "_yaw"),
            ("engine.control.plan", "PHYSICS_HZ")} <= names
    assert ("engine.control.plan", "segments") not in names


RESEARCH_IMPORTER = """
import importlib.util, json, sys
from pathlib import Path
root = Path(sys.argv[1])
sys.path[:0] = [str(root), str(root / "research")]
out = {}
for p in sorted((root / "research").rglob("*.py")):
    spec = importlib.util.spec_from_file_location("research_" + p.stem, p)
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        out[str(p.relative_to(root))] = "ok"
    except ModuleNotFoundError as e:  # a third-party package this environment lacks
        top = (e.name or "").split(".")[0]
        out[str(p.relative_to(root))] = "ok" if top and top not in ("engine", "training") and not (
            root / "research" / f"{top}.py").exists() else f"ModuleNotFoundError: {e}"
    except BaseException as e:
        out[str(p.relative_to(root))] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def test_research_scripts_import_without_running():
    """Each research script imports (its work behind `if __name__ == "__main__":`): in one
    subprocess, as `python research/X.py` would find the engine and its sibling scripts."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, "-c", RESEARCH_IMPORTER, str(REPO)], capture_output=True, text=True,
                         timeout=120, env=env, cwd=REPO)
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(results) == len(research_scripts())
    assert {k: v for k, v in results.items() if v != "ok"} == {}
    main_guard = [str(p.relative_to(REPO)) for p in research_scripts()
                  if not re.search(r"__name__ == [\"']__main__[\"']", p.read_text(encoding="utf-8"))]
    assert main_guard == []
