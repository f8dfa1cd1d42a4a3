"""The structure of shared/: packages import only downward through the layers below, and no module is part of an
import circle. Every import counts, the ones inside functions included (a lazy import is still a dependency).

Layers, bottom to top (WORKSPACE.md, "Layers"): a package may import packages of lower layers only; sideways
(same layer) and upward imports fail here with the file and line.
"""
import ast
import os

import pytest

from conftest import REPO_ROOT

LAYERS = (
    ("shared", "shared.registry", "shared.fs", "shared.net"),  # names, registries; local / gs:// files; hostile HTTP
    ("shared.config",),                                  # the config schema, loading, validation, mesh plan
    ("shared.sharding", "shared.metrics", "shared.stats", "shared.distributed"),  # meshes; metrics; CIs; barriers
    ("shared.model", "shared.data", "shared.checkpoint", "shared.eval", "shared.mi"),
    ("shared.train", "shared.rewards", "shared.latent"),  # the Trainer, losses, SFT; the reward contract; latents
    ("shared.rl", "shared.rm", "shared.diffusion"),      # post-training loops on the Trainer
    ("shared.agent",),                                   # multi-turn, multi-role rollouts with tools, on the RL loop
    ("shared.judges",),                                  # model-backed rewards and judges
    ("shared.skills",),                                  # skill folders and their evolution, on judges' parsers
    ("shared.launch", "shared.sweep", "shared.builtin", "shared.aot"),  # entry points
)
LAYER = {package: level for level, packages in enumerate(LAYERS) for package in packages}


def shared_modules() -> dict[str, str]:
    modules = {}
    for folder, _, files in os.walk(os.path.join(REPO_ROOT, "shared")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, REPO_ROOT)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                modules[".".join(parts)] = path
    return modules


def import_edges(modules: dict[str, str]) -> list[tuple[str, str, int]]:
    """(importer, imported shared module, line) for every import statement in shared/."""
    def known(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    edges = []
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                resolved = known(target) if target.split(".")[0] == "shared" else ""
                if resolved and resolved != module:
                    edges.append((module, resolved, node.lineno))
    return edges


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


@pytest.fixture(scope="module")
def graph():
    modules = shared_modules()
    return modules, import_edges(modules)


def test_every_package_has_a_layer(graph):
    modules, _ = graph
    missing = sorted({package_of(m) for m in modules} - set(LAYER))
    assert not missing, f"packages without a layer in tests/test_import_graph.py LAYERS: {missing}"


def test_imports_only_run_down_the_layers(graph):
    modules, edges = graph
    wrong = []
    for importer, imported, line in edges:
        source, target = package_of(importer), package_of(imported)
        if source == target or target == "shared":
            continue
        if LAYER[target] >= LAYER[source]:
            direction = "sideways" if LAYER[target] == LAYER[source] else "upward"
            wrong.append(f"{os.path.relpath(modules[importer], REPO_ROOT)}:{line}: {importer} imports {imported} "
                         f"({direction}: layer {LAYER[source]} -> {LAYER[target]})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_import_circles(graph):
    modules, edges = graph
    successors = {m: set() for m in modules}
    for importer, imported, _ in edges:
        if imported != "shared":  # the root package's __init__ imports nothing
            successors[importer].add(imported)
    circles = strongly_connected(successors)
    assert not circles, "import circles: " + "; ".join(" -> ".join(sorted(c)) for c in circles)


def test_a_circle_is_found():
    """The detector itself: a -> b -> c -> a is one circle, d alone is none."""
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def strongly_connected(successors: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative; returns the components with more than one module."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in successors:
        if root in index:
            continue
        work = [(root, iter(sorted(successors[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found
