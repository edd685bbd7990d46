"""How config files are read as YAML: safely, numbers as numbers, no key given twice, and bounded.

Safe loading (no tag builds an object) keeps a file from running code; the bounds keep it from
hanging the script: a document nested deeper than :data:`MAX_DEPTH`, or whose aliases (``*name``)
expand to more than :data:`MAX_VALUES` values (an "alias bomb": a few hundred bytes that expand to
billions of items, which any later ``repr``, copy or ``json.dumps`` would try to build) is refused
before anything is built from it. Merge keys (``<<: *defaults``) share blocks as standard YAML does.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from maml_rl.utils.echo import echo

__all__ = ["MAX_DEPTH", "MAX_VALUES", "ConfigLoader", "check_nesting"]

#: Levels of nesting a config may have (a config has two or three: a key, its list or mapping).
MAX_DEPTH = 50

#: Values (scalars, lists and mappings) a config may hold with its aliases expanded; a config holds dozens.
MAX_VALUES = 100_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _too_deep(mark: Any) -> yaml.YAMLError:
    return yaml.composer.ComposerError(
        None, None, f"nested more than {MAX_DEPTH} levels deep, more than a config holds: is it the right file?", mark)


class ConfigLoader(yaml.SafeLoader):
    """Safe YAML loader that also reads ``1e-2`` (no dot) as a float, not a string, refuses a key
    given twice in one mapping (YAML would keep the last silently), and refuses a document nested
    deeper than :data:`MAX_DEPTH` or holding more than :data:`MAX_VALUES` values once its aliases
    are expanded."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._flattened: set[int] = set()

    # -- bounds, on the node graph before anything is built from it
    def compose_node(self, parent, index):
        # The composer recurses once per level: refused here, before Python's recursion limit.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _too_deep(self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        _Expansion().measure(node)
        return node

    # -- merge keys, keys given twice
    def flatten_mapping(self, node):
        """Merge keys (``<<: *defaults``, ``<<: [*a, *b]``) as YAML defines them: the mapping's own keys
        override merged ones, and an earlier mapping of a merge list overrides a later one. Each mapping
        is flattened once: its own keys are checked then, and a merged key it overrides is not "twice"."""
        if id(node) in self._flattened:
            return
        self._flattened.add(id(node))
        own, merged = [], []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"expected a mapping or list of mappings for merging, but found {source.id}", source.start_mark)
                self.flatten_mapping(source)
                merged.append(source.value)
        self._refuse_keys_twice(own)
        # Later pairs win when the mapping is built: the merged mappings last to first, then its own.
        node.value = [pair for pairs in reversed(merged) for pair in pairs] + own

    def _refuse_keys_twice(self, pairs) -> None:
        seen = {}
        for key_node, _ in pairs:
            if key_node.tag == "tag:yaml.org,2002:value":  # the "=" key, read as a string as YAML does
                key_node.tag = "tag:yaml.org,2002:str"
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: YAML's own error says so
                return
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {echo(key)} is given twice, on line {first.start_mark.line + 1} and on "
                    f"line {key_node.start_mark.line + 1}: keep one", key_node.start_mark)


class _Expansion:
    """The size and depth of a composed document with its aliases expanded, each node measured once."""

    def __init__(self) -> None:
        self._measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth)
        self._open: set[int] = set()

    def measure(self, node: yaml.Node, depth: int = 1) -> tuple[int, int]:
        if depth > MAX_DEPTH:  # before going further down: the recursion stays within MAX_DEPTH
            raise _too_deep(node.start_mark)
        if id(node) in self._measured:
            values, below = self._measured[id(node)]
        elif id(node) in self._open:
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a list or mapping it is part of, so the value never ends", node.start_mark)
        else:
            self._open.add(id(node))
            values, below = 1, 1
            if isinstance(node, yaml.SequenceNode):
                children = node.value
            elif isinstance(node, yaml.MappingNode):
                children = [child for pair in node.value for child in pair]
            else:
                children = []
            for child in children:
                child_values, child_depth = self.measure(child, depth + 1)
                values += child_values
                below = max(below, child_depth + 1)
                if values > MAX_VALUES:
                    raise yaml.composer.ComposerError(
                        None, None, f"it holds more than {MAX_VALUES} values once its aliases (*name) are "
                        f"expanded, more than a config holds: write the values out, or share fewer", node.start_mark)
            self._open.discard(id(node))
            self._measured[id(node)] = values, below
        if depth + below - 1 > MAX_DEPTH:
            raise _too_deep(node.start_mark)
        return values, below


def check_nesting(data: Any) -> None:
    """Refuse data (a parsed JSON config) nested deeper than :data:`MAX_DEPTH`, as YAML configs are.

    :raises ValueError: saying so.
    """
    level = [data]
    for _ in range(MAX_DEPTH):
        level = [child for item in level if isinstance(item, (dict, list))
                 for child in (item.values() if isinstance(item, dict) else item)]
        if not level:
            return
    raise ValueError(f"nested more than {MAX_DEPTH} levels deep, more than a config holds: is it the right file?")


ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)
