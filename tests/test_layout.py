"""The package's layout (docs/layout.md): imports point one way, the jobs are packages
that never import each other, crf/ and genome/ stay apart, the gene model has one
package, and no module or function outside the kernels grows past a page or two.

The import graph is read from the source with ast: every `import` and `from ... import`
anywhere in a module (function-level imports included) that names a semiseg module.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "semiseg"
JOBS = ("semiseg.train", "semiseg.annotate", "semiseg.evaluate")  # each a package
TOP_LEVEL = {"__init__", "cli", "config", "errors", "ui", "checkpoint", "runtime", "demo",
             "model", "metrics"}
MAX_LINES = 600
MAX_FUNCTION_LINES = 100
KERNELS = ("semiseg.crf.triton",)  # the Triton kernels: exempt from both sizes


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


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _compiled(fn: ast.AST) -> bool:
    """A numba-compiled kernel (`@njit(...)`): a kernel, like the Triton ones."""
    for d in getattr(fn, "decorator_list", []):
        d = d.func if isinstance(d, ast.Call) else d
        if isinstance(d, ast.Name) and d.id == "njit":
            return True
    return False


def _functions(path: Path):
    """(qualified name, lines) of every function and method of a module, numba-compiled
    kernels left out."""
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not _compiled(child):
                    out.append((prefix + child.name, child.end_lineno - child.lineno + 1))
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    walk(ast.parse(path.read_text()), "")
    return out


def test_graph_reader_sees_relative_and_function_level_imports():
    graph = import_graph()
    assert "semiseg.checkpoint" in graph["semiseg.annotate.run"]  # `from ..checkpoint`
    assert "semiseg.model" in graph["semiseg.checkpoint"]  # inside a function
    assert "semiseg.ui" in graph["semiseg.train.loop"]  # `from .. import ui`
    assert "semiseg.annotate.batches" in graph["semiseg.annotate.run"]  # `from . import`
    assert "semiseg.genome.labels" in graph["semiseg.genome"]  # a package's __init__
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert _in("semiseg.train.loop", "semiseg.train")
    assert not _in("semiseg.trainer", "semiseg.train")


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_top_level_holds_only_the_house_modules():
    """At most 10 modules at the top; everything else lives in a package named for what
    it holds."""
    top = {p.stem for p in PKG.glob("*.py")}
    assert top <= TOP_LEVEL, sorted(top - TOP_LEVEL)
    assert len(top) <= 10
    packages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert {"annotate", "crf", "evaluate", "genemodel", "genome", "train"} <= packages


@pytest.mark.parametrize("job", JOBS)
def test_jobs_never_import_other_jobs(job):
    """No module of a job's package reaches a module of another job's package."""
    graph = import_graph()
    mine = [m for m in graph if _in(m, job)]
    assert mine
    reach = set().union(*(_reachable(graph, m) for m in mine))
    others = sorted(m for m in reach for j in JOBS if j != job and _in(m, j))
    assert not others, f"{job} reaches {others}"


def test_annotate_and_evaluate_never_reach_train():
    graph = import_graph()
    for job in ("semiseg.annotate", "semiseg.evaluate"):
        for m in (m for m in graph if _in(m, job)):
            assert not any(_in(d, "semiseg.train") for d in _reachable(graph, m)), m


def test_crf_imports_nothing_of_semiseg_outside_crf():
    for name, deps in import_graph().items():
        if _in(name, "semiseg.crf"):
            assert all(_in(d, "semiseg.crf") for d in deps), (name, deps)


def test_genome_holds_files_and_labels_not_the_model():
    """genome/ imports only genome/ and errors: never torch, the gene model, the jobs."""
    modules = _modules()
    for name, deps in import_graph().items():
        if _in(name, "semiseg.genome"):
            assert all(_in(d, "semiseg.genome") or d == "semiseg.errors" for d in deps), \
                (name, deps)
            assert "torch" not in _external_imports(modules[name]), name


def test_the_gene_model_is_one_package():
    """genemodel/ uses the CRF, genome/ and the small shared modules, never a job."""
    allowed = ("semiseg.genemodel", "semiseg.crf", "semiseg.genome", "semiseg.errors",
               "semiseg.ui", "semiseg.config")
    for name, deps in import_graph().items():
        if _in(name, "semiseg.genemodel"):
            assert all(any(_in(d, a) for a in allowed) for d in deps), (name, deps)


def test_importing_semiseg_needs_no_bio_library():
    path = _modules()["semiseg"]
    tree = ast.parse(path.read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not top  # read_prediction imports pyranges when called


def test_modules_stay_small():
    big = {}
    for name, path in _modules().items():
        if any(_in(name, k) for k in KERNELS):
            continue
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            big[name] = n
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_functions_stay_short():
    long = {}
    for name, path in _modules().items():
        if any(_in(name, k) for k in KERNELS):
            continue
        for fn, n in _functions(path):
            if n > MAX_FUNCTION_LINES:
                long[f"{name}.{fn}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
