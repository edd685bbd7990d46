"""The house rules of docs/architecture.md, read from the source: which
layer may import which, no import cycle, the torch-free worker layer, and
files small enough to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "maml_rl"
MAX_LINES = 450

# The sampler's layers, top to bottom; a module may import its own layer or lower ones.
SAMPLER_LAYERS = {
    "maml_rl.samplers.sampler": 4,
    "maml_rl.samplers.trajectories": 4,
    "maml_rl.samplers.trial_requests": 4,
    "maml_rl.samplers.backends": 3,
    "maml_rl.samplers.settings": 2,
    "maml_rl.samplers.rollout": 2,
    "maml_rl.samplers.workers": 1,
    "maml_rl.samplers.errors": 0,
}
# Sibling layers that must not import each other.
SIBLINGS = [("maml_rl.samplers.settings", "maml_rl.samplers.rollout")]
# Top-level packages and what they must never import (samplers and metalearners are siblings).
FORBIDDEN = {
    "maml_rl.envs": ("maml_rl.samplers", "maml_rl.policies", "maml_rl.metalearners", "torch"),
    "maml_rl.policies": ("maml_rl.samplers", "maml_rl.metalearners"),
    "maml_rl.samplers": ("maml_rl.metalearners",),
    "maml_rl.samplers.workers": ("torch", "maml_rl.policies", "maml_rl.episodes"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function, as absolute names."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(), str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            # `from . import errors` imports the module maml_rl.samplers.errors.
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: {m for m in imports_of(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer(module: str):
    for prefix, rank in SAMPLER_LAYERS.items():
        if within(module, prefix):
            return prefix, rank
    return None, None


def test_the_graph_is_read():
    """The checks below mean something only if the imports are found."""
    assert "maml_rl.samplers.workers.pools" in GRAPH["maml_rl.samplers.backends.local"]
    assert "maml_rl.samplers.errors" in GRAPH["maml_rl.samplers.workers.pools"]
    assert "maml_rl.samplers.sampler" in GRAPH["maml_rl.samplers"]
    assert len(MODULES) > 50


def test_no_import_cycle():
    """Tarjan's strongly connected components: a cycle is a component of more than one module."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


def test_sampler_layers_import_downward_only():
    upward = []
    for module, targets in GRAPH.items():
        own, rank = layer(module)
        if own is None:
            continue
        for target in targets:
            other, other_rank = layer(target)
            if other is None:
                continue
            if other_rank > rank or any({own, other} == set(pair) for pair in SIBLINGS):
                upward.append(f"{module} -> {target}")
    assert upward == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_packages_keep_out_of_what_they_must_not_import(package):
    offences = []
    for name, path in MODULES.items():
        if not within(name, package):
            continue
        for target in imports_of(path):
            if any(within(target, forbidden) for forbidden in FORBIDDEN[package]):
                offences.append(f"{name} -> {target}")
    assert offences == []


def test_every_sampler_module_belongs_to_a_layer():
    """A newcomer can name the layer of any file from its path."""
    strays = [m for m in MODULES if within(m, "maml_rl.samplers") and m != "maml_rl.samplers" and layer(m)[0] is None]
    assert strays == []


def test_no_file_is_too_long_to_read():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
