"""The one YAML loader of the project: PyYAML's safe loader with aliases bounded.

A few bytes of nested anchors and aliases (a "billion laughs") load in microseconds as shared Python objects,
then make whatever walks them (validation, a copy into a dataset's meta, a JSON dump) run for minutes and fill
memory. Every file the project reads as YAML (contracts, robot configs, launch files, parameter files,
calibration, checkpoint contracts) goes through `load_yaml`, which composes the document, measures it with
every alias expanded, and refuses it with `YamlLimitError` (a `yaml.YAMLError`, so existing handlers report it
as the file's YAML error) when it is larger than `MAX_EXPANDED`, refers to itself, or nests deeper than Python's
recursion allows. Aliases that stay small (a shared `defaults` mapping merged into several entries) still load.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_EXPANDED = 10_000_000
"""Most nodes plus scalar characters a document may hold once every alias is expanded (~10 MB of YAML)."""


class YamlLimitError(yaml.YAMLError):
    """A YAML document refused for its size once aliases are expanded, a self-reference or its nesting depth."""


def expanded_size(root: yaml.Node, limit: int = MAX_EXPANDED) -> int:
    """Nodes plus scalar characters under `root` with every alias expanded (counted up to just over `limit`).

    Shared nodes are measured once (memoized by identity), so this runs in the size of the document, not of its
    expansion. Raises `YamlLimitError` for a node that contains itself.
    """
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            size = 1 + (len(str(node.value)) if isinstance(node, yaml.ScalarNode) else 0)
            size += sum(sizes[id(child)] for child in children)
            sizes[key] = min(size, limit + 1)
            entered.discard(key)
            continue
        if key in sizes:
            continue
        if key in entered:
            raise YamlLimitError(
                f"an alias refers to the mapping or list that holds it (line {node.start_mark.line + 1}): "
                "a recursive document cannot be loaded; write the values out"
            )
        entered.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class BoundedSafeLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses documents whose aliases expand past `max_expanded` (subclass it to add
    constructors, as the launch files' line-marking loader does)."""

    max_expanded = MAX_EXPANDED

    def compose_document(self) -> yaml.Node | None:
        node: yaml.Node | None = super().compose_document()
        if node is not None:
            size = expanded_size(node, self.max_expanded)
            if size > self.max_expanded:
                raise YamlLimitError(
                    f"its aliases (*name) expand to more than {self.max_expanded:,} nodes and characters (nested "
                    "anchors, a 'billion laughs'?); write the values out or use fewer nested aliases"
                )
        return node


def load_yaml(stream: str | bytes, loader: type[BoundedSafeLoader] = BoundedSafeLoader) -> Any:
    """Parse one YAML document like `yaml.safe_load`, bounded; raises `yaml.YAMLError` (`YamlLimitError` for a
    document refused for its expansion, self-reference or depth)."""
    try:
        return yaml.load(stream, Loader=loader)  # a SafeLoader subclass: no arbitrary objects
    except RecursionError:
        raise YamlLimitError(
            "nested too deeply to load (thousands of levels of lists or mappings); flatten the document"
        ) from None
