"""The package's layout (DESIGN.md): imports point one way, jobs do not import jobs,
crf/ and genome/ stay apart, and no module outside the kernels grows past ~600 lines.

The import graph is read from the source with ast: every `import` and `from ... import`
anywhere in a module (function-level imports included) that names a semiseg module.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "semiseg"
JOBS = ("semiseg.train.loop", "semiseg.annotate.run", "semiseg.evaluate.run", "semiseg.evaluate.plot")
MAX_LINES = 650  # "not much over 600"; the GPU and CPU kernels are exempt


@functools.cache
def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _targets(name: str, path: Path, node: ast.AST, modules) -> list[str]:
    """The semiseg modules an import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in modules]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = name.split(".")
        if path.name != "__init__.py":
            base = base[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        if sub in modules:  # `from . import ui`: the submodule
            out.append(sub)
        elif target in modules and (node.module or alias.name in _bound(modules[target])):
            out.append(target)  # a name the module defines (not a missing submodule)
    return out


def _bound(path: Path) -> set[str]:
    """Names a module binds at its top level."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(_targets(name, path, node, modules))
        deps.discard(name)
        graph[name] = deps
    return graph


def _external_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def _reachable(graph, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def find_cycle(graph) -> list[str] | None:
    """A cycle [a, b, ..., a] of the graph, or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_graph_reader_sees_relative_and_function_level_imports():
    graph = import_graph()
    assert "semiseg.checkpoint" in graph["semiseg.annotate.run"]  # top-level, relative
    assert "semiseg.model" in graph["semiseg.checkpoint"]  # inside a function
    assert "semiseg.ui" in graph["semiseg.train.loop"]  # `from . import __version__, ui`
    assert "semiseg.genome.labels" in graph["semiseg.genome"]  # a package's __init__
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("job", JOBS)
def test_jobs_never_import_other_jobs(job):
    reach = _reachable(import_graph(), job)
    others = sorted(j for j in JOBS if j != job and j in reach)
    assert not others, f"{job} imports {others}"


def test_annotate_evaluate_plot_never_reach_train():
    graph = import_graph()
    for job in ("semiseg.annotate.run", "semiseg.evaluate.run", "semiseg.evaluate.plot"):
        assert "semiseg.train.loop" not in _reachable(graph, job), job


def test_crf_and_genome_stay_apart():
    graph = import_graph()
    modules = _modules()
    for name, deps in graph.items():
        if name.startswith("semiseg.crf"):
            assert all(d.startswith("semiseg.crf") for d in deps), (name, deps)
        if name.startswith("semiseg.genome"):
            assert all(d.startswith("semiseg.genome") or d in ("semiseg", "semiseg.errors")
                       for d in deps), (name, deps)
            assert "torch" not in _external_imports(modules[name]), name


def test_importing_semiseg_needs_no_bio_library():
    path = _modules()["semiseg"]
    tree = ast.parse(path.read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not top  # read_prediction imports pyranges when called


def test_modules_stay_small():
    big = {}
    for name, path in _modules().items():
        if name.startswith(("semiseg.crf.triton.jit", "semiseg.crf.numba.kernels")):  # the kernels
            continue
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            big[name] = n
    assert not big, f"modules over {MAX_LINES} lines: {big}"
