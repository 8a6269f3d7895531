"""A YAML loader that remembers on which line every mapping, sequence and key started.

Mappings load as `MarkedMap` (a dict with `.line` and `.key_lines`), sequences as `MarkedList`
(a list with `.line`); scalars load as plain Python values. Duplicate keys are an error, unlike
PyYAML's default of silently keeping the last one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from lerobot_ros.bounded_yaml import BoundedSafeLoader, load_yaml


class MarkedMap(dict[Any, Any]):
    """A YAML mapping with the 1-based line of its start and of each of its keys."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[Any, int] = {}

    def line_of(self, key: Any) -> int:
        """Line of `key`, or of the mapping itself when the key is absent."""
        return self.key_lines.get(key, self.line)


class MarkedList(list[Any]):
    """A YAML sequence with the 1-based line where it starts and the line of each item."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


class YamlSyntaxError(ValueError):
    """The text is not valid YAML (or repeats a key); `line` is 1-based."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: YAML syntax: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class _MarkedLoader(BoundedSafeLoader):
    pass


def _construct_map(loader: yaml.SafeLoader, node: yaml.MappingNode) -> MarkedMap:
    loader.flatten_mapping(node)
    result = MarkedMap(node.start_mark.line + 1)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in result:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {result.key_lines[key]})", key_node.start_mark
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_list(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> MarkedList:
    result = MarkedList(node.start_mark.line + 1)
    for item in node.value:
        result.append(loader.construct_object(item, deep=True))
        result.item_lines.append(item.start_mark.line + 1)
    return result


_MarkedLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_MarkedLoader.add_constructor("tag:yaml.org,2002:seq", _construct_list)


def load_marked_yaml(text: str, path: Path) -> Any:
    """Parse `text` (read from `path`, used in messages); raises `YamlSyntaxError` with the line."""
    try:
        return load_yaml(text, _MarkedLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        if err.context_mark is not None and (mark is None or mark.index >= len(text.rstrip())):
            # "unexpected end of stream": where the unclosed construct started says more.
            mark = err.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = " ".join(part for part in (err.context, err.problem) if part) or "invalid YAML"
        raise YamlSyntaxError(path, line, problem) from None
    except yaml.YAMLError as err:
        raise YamlSyntaxError(path, 1, str(err).replace("\n", " ")) from None
