"""The package flows one way: no module's imports (top-level or inside functions) form a circle,
and evaluation stands on the loss and the metrics, never on training."""

import ast
from pathlib import Path

import nmt

PACKAGE = Path(nmt.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each nmt module -> the nmt modules it imports, read from the source with ast."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
                # `from nmt import runtime` imports the module nmt.runtime
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_graph_is_read_from_the_real_imports():
    graph = import_graph()
    assert {"nmt.loss", "nmt.metrics", "nmt.checkpoint"} <= graph["nmt.evaluate"]
    assert "nmt.step" in graph["nmt.train"] and "nmt.loss" in graph["nmt.step"] and "nmt.runtime" in graph["nmt.loss"]


def test_no_import_circle_in_the_package():
    graph = import_graph()
    circles = sorted(name for name in graph if name in _reachable(graph, name))
    assert not circles, f"modules on an import circle: {circles}"


def test_evaluation_does_not_import_training():
    graph = import_graph()
    assert "nmt.train" not in _reachable(graph, "nmt.evaluate")
    assert "nmt.train" not in _reachable(graph, "nmt.loss")


def _definitions(path: Path):
    """(name, lines) of every class and function in a module, nested ones included."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield f"{path.name}:{node.name}", node.end_lineno - node.lineno + 1


def test_the_code_stays_readable_in_an_afternoon():
    """The training loop fits in one module of a few screens; no class or function grows past 120
    lines, and the commands stay thin (each parses its arguments and calls the library)."""
    assert len((PACKAGE / "train.py").read_text(encoding="utf-8").splitlines()) < 350
    too_long = [(name, n) for path in PACKAGE.rglob("*.py") for name, n in _definitions(path) if n > 120]
    assert not too_long, too_long
    long_commands = [(name, n) for name, n in _definitions(PACKAGE / "cli.py") if n > 50]
    assert not long_commands, long_commands
