"""How config files are read as YAML: safely, numbers as numbers, and no key given twice."""

from __future__ import annotations

import re

import yaml

__all__ = ["ConfigLoader"]


class ConfigLoader(yaml.SafeLoader):
    """Safe YAML loader that also reads ``1e-2`` (no dot) as a float, not a string, and refuses a key
    given twice in one mapping (YAML would keep the last silently)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # an unhashable key: YAML's own error says so
                    break
                if first is not key_node:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice, on line {first.start_mark.line + 1} and on "
                        f"line {key_node.start_mark.line + 1}: keep one", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)
