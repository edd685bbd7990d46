"""The house rules of docs/architecture.md, read from the source: which
layer may import which, no import cycle, the torch-free worker layer, and
files small enough to read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "maml_rl"
MAX_LINES = 410
# The sampler's facade only checks, dispatches and assembles: the work is in its layers.
MAX_FACADE_LINES = 320

# The sampler's layers, top to bottom; a module may import its own layer or lower ones.
SAMPLER_LAYERS = {
    "maml_rl.samplers.sampler": 4,
    "maml_rl.samplers.trajectories": 4,
    "maml_rl.samplers.exclusive": 4,
    "maml_rl.samplers.inspection": 4,
    "maml_rl.samplers.conditioning": 4,
    "maml_rl.samplers.vector_env": 4,
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
    # The classic references play the envs with numpy alone.
    "maml_rl.references": ("maml_rl.samplers", "maml_rl.policies", "maml_rl.metalearners", "torch"),
    "maml_rl.policies": ("maml_rl.samplers", "maml_rl.metalearners"),
    # The sampler knows rollouts: the algorithm's loop, inner step and losses are the meta-learners'.
    "maml_rl.samplers": ("maml_rl.metalearners", "maml_rl.data.baseline"),
    "maml_rl.samplers.workers": ("torch", "maml_rl.policies", "maml_rl.data.episodes"),
}


# The whole package by folder, bottom to top: a module imports its own layer or lower ones, and never a sibling.
# config/ declares keys (the shared ones, which every layer reads its defaults from); the reader of config files,
# which asks the algorithm registry for the rest, is app/config_files.py.
PACKAGE_RANKS = {
    "maml_rl.utils": 0,
    "maml_rl.envs": 1,
    "maml_rl.policies": 2, "maml_rl.references": 2,
    "maml_rl.config": 3,
    "maml_rl.data": 4,
    "maml_rl.samplers": 5, "maml_rl.metalearners": 5,
    "maml_rl.app": 7,
    # pytorch-maml-rl's names and this package's earlier paths, as adapters over the rest: the top, and the
    # package root (maml_rl/__init__.py, which installs it) is the only module that imports it.
    "maml_rl.legacy": 8,
}
# Other meta-RL code imports the sampler alone; the algorithms take a sampler and never import it.
PACKAGE_SIBLINGS = [("maml_rl.samplers", "maml_rl.metalearners"), ("maml_rl.policies", "maml_rl.references")]
# The package root holds only subpackages and __init__.
ROOT_FILES = {"__init__.py"}


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


def package_rank(module: str):
    matches = [(prefix, rank) for prefix, rank in PACKAGE_RANKS.items() if within(module, prefix)]
    return max(matches, key=lambda m: len(m[0])) if matches else (None, None)


def top_level_imports(path: Path) -> set[str]:
    """The modules ``path`` imports outside any function (what loading it pulls in)."""
    tree = ast.parse(path.read_text(), str(path))
    shallow = ast.Module(body=[n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.ClassDef))], type_ignores=[])
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(shallow):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            found.add(".".join(base + ([node.module] if node.module else [])) if node.level else node.module)
    return found


def test_every_module_has_a_layer():
    """A newcomer can name any file's layer from its path: a new module must be placed in the table."""
    strays = [m for m in MODULES if m != "maml_rl" and package_rank(m)[0] is None]
    assert strays == []


def test_the_package_imports_downward_only():
    upward = []
    for module, targets in GRAPH.items():
        own, rank = package_rank(module)
        if own is None:
            continue
        for target in targets:
            other, other_rank = package_rank(target)
            if other is None or other == own:
                continue
            if other_rank > rank or {own, other} in [set(pair) for pair in PACKAGE_SIBLINGS]:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_only_the_package_root_imports_legacy():
    """The old names are at the edge: adapters over the rest, which knows nothing of them."""
    importers = sorted(f"{module} -> {target}" for module, targets in GRAPH.items()
                       if module != "maml_rl" and not within(module, "maml_rl.legacy")
                       for target in targets if within(target, "maml_rl.legacy"))
    assert importers == []
    assert "maml_rl.legacy" in GRAPH["maml_rl"]


def test_legacy_loads_nothing_but_itself_with_the_package():
    """``import maml_rl`` (a worker process's too) installs legacy: at its top level it loads only itself."""
    loaded = {}
    for module, path in MODULES.items():
        if within(module, "maml_rl.legacy"):
            ours = {t for t in top_level_imports(path) if t and t.startswith("maml_rl")}
            outside = sorted(t for t in ours if not within(t, "maml_rl.legacy"))
            if outside:
                loaded[module] = outside
    assert loaded == {}


def test_the_sampler_facade_stays_small():
    lines = len((PACKAGE / "samplers" / "sampler.py").read_text().splitlines())
    assert lines <= MAX_FACADE_LINES, lines


def test_the_root_holds_one_subpackage_per_layer():
    """Every module of the root moved into the folder of its layer; only __init__ stays."""
    assert {p.name for p in PACKAGE.glob("*.py")} == ROOT_FILES
    folders = {f"maml_rl.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert folders == {prefix for prefix in PACKAGE_RANKS if prefix.count(".") == 1}


def test_the_folder_rule_would_catch_an_upward_import():
    """The rule is not vacuous: the data layer importing the sampler, or the sampler a meta-learner, is caught."""
    def upward(module, target):
        own, rank = package_rank(module)
        other, other_rank = package_rank(target)
        return other_rank > rank or {own, other} in [set(pair) for pair in PACKAGE_SIBLINGS]

    assert upward("maml_rl.data.episodes", "maml_rl.samplers.sampler")
    assert upward("maml_rl.samplers.sampler", "maml_rl.metalearners.gradient.losses")
    assert upward("maml_rl.config.hyperparameters", "maml_rl.app.config_files")
    assert upward("maml_rl.metalearners.base", "maml_rl.app.runs.files")
    assert not upward("maml_rl.app.training", "maml_rl.samplers.sampler")


def test_the_application_names_no_algorithm():
    """app/, config/ and the scripts reach the algorithms only through the registry and the MetaLearner
    contract: no registered name, learner class or batch type stands in their code (identifiers and strings;
    comments and docstrings may give examples)."""
    from maml_rl.metalearners import METALEARNERS

    batch_types = {"AdaptationBatch", "TrialBatch", "TransitionBatch", "Transitions"}
    names = {*METALEARNERS, *(learner.__name__ for learner in METALEARNERS.values()), *batch_types}
    assert {"maml-trpo", "rl2-ppo", "pearl", "ProMP", "TrialBatch"} <= names  # the check is not vacuous
    words = {name.lower() for name in names}
    paths = [*PACKAGE.joinpath("app").rglob("*.py"), *PACKAGE.joinpath("config").rglob("*.py"),
             *(PACKAGE.parent / script for script in ("train.py", "test.py", "report.py"))]
    found = []
    for path in paths:
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, ast.Attribute):
                text = node.attr
            elif isinstance(node, ast.alias):
                text = node.name.rsplit(".", 1)[-1]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
            else:
                continue
            tokens = {t.lower() for t in re.findall(r"[A-Za-z0-9²_-]+", text)}
            hits = tokens & words
            if hits:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {', '.join(sorted(hits))}")
    assert not found, "the application names an algorithm:\n" + "\n".join(found)
