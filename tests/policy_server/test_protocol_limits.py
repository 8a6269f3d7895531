"""Malformed frames that once escaped the typed errors: a deeply nested JSON header and an empty tensor with huge
dimensions are ProtocolErrors (INVALID_ARGUMENT) with one line, before any parse recursion or reshape."""

from __future__ import annotations

import json
import struct

import pytest

from lerobot_policy_server import protocol
from lerobot_policy_server.protocol import ErrorCode, ProtocolError


def frame_with_header(text: bytes, kind: int = protocol.Kind.PREDICT_REQUEST) -> bytes:
    return struct.pack("<4sHHI", protocol.MAGIC, protocol.PROTOCOL_VERSION, kind, len(text)) + text


def deep_json_frame(depth: int = 100_000) -> bytes:
    return frame_with_header(b"[" * depth + b"]" * depth)


def huge_empty_tensor_frame() -> bytes:
    entry = {"name": "x", "dtype": "float32", "shape": [0, 2**40, 2**40, 2**40], "offset": 0, "nbytes": 0}
    return frame_with_header(json.dumps({"stamp_ns": 0, "task": "", "tensors": [entry]}).encode())


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (deep_json_frame(), "nested deeper than"),
        (frame_with_header(b'{"tensors": [], "task": ' + b"[" * 40 + b"]" * 40 + b"}"), "nested deeper than"),
        (huge_empty_tensor_frame(), "dimensions"),
    ],
)
def test_malformed_frames_are_typed_one_line_errors(frame: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words) as info:
        protocol.decode_predict_request(frame)
    assert info.value.code is ErrorCode.INVALID_ARGUMENT
    assert "\n" not in str(info.value)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    task = "[" * 1000 + '\\"{' * 100
    header = json.dumps({"stamp_ns": 1, "task": task, "tensors": []}).encode()
    assert protocol.decode_predict_request(frame_with_header(header)).task == task
