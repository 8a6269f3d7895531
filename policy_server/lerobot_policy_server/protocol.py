"""The policy server's wire protocol: typed messages, encoded without pickle (numpy only, no grpc, no torch).

Every message is one frame::

    b"LRPS" | version: u16 | kind: u16 | header length: u32 | header: UTF-8 JSON object | payload

all integers little-endian. The header holds the message's plain fields and, under ``"tensors"``, one entry
per array: ``{"name", "dtype", "shape", "offset", "nbytes"}`` locating its raw little-endian bytes in the
payload. Only the dtypes in `DTYPES` are accepted; sizes, offsets and shapes are checked before a byte is
read, so a malformed frame is a `ProtocolError` naming what is wrong, never code execution.

A Predict request may carry camera images compressed (`EncodedImage`, JPEG or PNG): the header's ``"images"``
object maps each such tensor's name to its encoding, and the tensor holds the compressed bytes (1-D uint8).
Requests without it are the raw-tensor frames of before. The Info reply's ``"image_encodings"`` says which
encodings the server decodes (absent: raw only); `images` encodes and decodes (bounded).

The service (`SERVICE`) has three unary methods, each taking and returning one frame:
``Info`` (what the policy needs and returns), ``Predict`` (an observation -> a chunk) and ``Reset`` (start
of an episode). Failures are gRPC status codes (`ErrorCode`) with a one-line message.
"""

from __future__ import annotations

import enum
import json
import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import numpy as np
import numpy.typing as npt

PROTOCOL_VERSION = 1
MAGIC = b"LRPS"
SERVICE = "lerobot_policy_server.PolicyServer"
METHODS = ("Info", "Predict", "Reset", "Stats")
DEFAULT_PORT = 50051
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
MAX_HEADER_BYTES = 4 * 1024 * 1024
MAX_DIMS = 8
MAX_JSON_DEPTH = 32  # a request header nests 3 deep, an Info reply's contract a few more
DTYPES = ("uint8", "int32", "int64", "float16", "float32", "float64", "bool")
_PREFIX = struct.Struct("<4sHHI")
RAW = "raw"
JPEG = "jpeg"
PNG = "png"
IMAGE_ENCODINGS = (RAW, JPEG, PNG)
COMPRESSED = (JPEG, PNG)


class Kind(enum.IntEnum):
    INFO_REQUEST = 1
    INFO_REPLY = 2
    PREDICT_REQUEST = 3
    PREDICT_REPLY = 4
    RESET_REQUEST = 5
    RESET_REPLY = 6
    STATS_REQUEST = 7
    STATS_REPLY = 8


class ErrorCode(str, enum.Enum):
    """Why a call failed; the values are gRPC status code names."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"  # the observation does not fit the policy
    FAILED_PRECONDITION = "FAILED_PRECONDITION"  # protocol version mismatch, policy cannot be served
    INTERNAL = "INTERNAL"  # the policy raised during inference
    UNAVAILABLE = "UNAVAILABLE"  # no server at the address, or it went away
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"  # no answer within the call's timeout
    UNIMPLEMENTED = "UNIMPLEMENTED"  # not a policy server (unknown method)
    UNAUTHENTICATED = "UNAUTHENTICATED"  # no token, or not the server's
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"  # the server is busy, or the request is larger than it admits
    UNKNOWN = "UNKNOWN"


class ProtocolError(ValueError):
    """A frame cannot be decoded (bad magic, version, kind, header or tensor); the message says which."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_ARGUMENT) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class FeatureSpec:
    """One observation input as it travels: cameras (H, W, 3) uint8, vectors float32 of `shape`."""

    key: str
    shape: tuple[int, ...]
    dtype: str
    visual: bool

    def check(self, value: npt.NDArray[Any]) -> None:
        """ProtocolError when `value` is not this feature's dtype and shape, or holds NaN or inf (a policy computes
        non-finite actions from them)."""
        if value.dtype.name != self.dtype or tuple(value.shape) != self.shape:
            raise ProtocolError(
                f"observation {self.key!r}: got {value.dtype} {tuple(value.shape)}, the policy needs "
                f"{self.dtype} {self.shape}" + (" (H, W, 3) as the camera gives it" if self.visual else "")
            )
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            where = np.flatnonzero(~np.isfinite(value))
            raise ProtocolError(
                f"observation {self.key!r} holds non-finite values ({value.reshape(-1)[where[0]]} at flat index "
                f"{where[0]}, {where.size} in all); send finite values"
            )


@dataclass(frozen=True)
class PolicyInfo:
    """What the served policy needs and returns (the Info reply)."""

    policy_type: str
    name: str
    backend: str  # "lerobot" (LeRobot's own classes and processors) or "lerobot_training"
    device: str
    inputs: tuple[FeatureSpec, ...]
    action_dim: int
    horizon: int
    action_names: tuple[str, ...] = ()
    fps: float | None = None
    language: bool = False  # whether the policy reads the task text
    contract: Mapping[str, Any] | None = None  # the checkpoint's contract (its content as data), when it has one
    versions: Mapping[str, str] = field(default_factory=dict)  # for the server's own log: never sent
    image_encodings: tuple[str, ...] = (RAW,)  # how Predict requests may send camera images


@dataclass(frozen=True)
class EncodedImage:
    """One camera image as it travels compressed: `encoding` (one of COMPRESSED) and its bytes."""

    encoding: str
    data: bytes


@dataclass(frozen=True)
class PredictRequest:
    """One observation: `stamp_ns` is its time on the robot's clock, echoed in the reply. `images` holds the
    camera images sent compressed (by key; not also in `observation`)."""

    stamp_ns: int
    task: str
    observation: Mapping[str, npt.NDArray[Any]]
    images: Mapping[str, EncodedImage] = field(default_factory=dict)


@dataclass(frozen=True)
class PredictReply:
    """A chunk of (horizon, action_dim) actions in dataset units, for the request stamped `stamp_ns`."""

    stamp_ns: int
    task: str
    actions: npt.NDArray[Any]
    inference_time_s: float
    action_names: tuple[str, ...] = ()


def _frame(kind: Kind, fields: Mapping[str, Any], tensors: Mapping[str, npt.NDArray[Any]] | None = None) -> bytes:
    entries = []
    blobs = []
    offset = 0
    for name, array in (tensors or {}).items():
        value = np.asarray(array)
        if value.dtype.name not in DTYPES:
            raise ProtocolError(f"tensor {name!r}: dtype {value.dtype} cannot be sent (allowed: {', '.join(DTYPES)})")
        if value.ndim > MAX_DIMS:
            raise ProtocolError(f"tensor {name!r}: {value.ndim} dimensions, at most {MAX_DIMS}")
        data = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
        entries.append({"name": name, "dtype": value.dtype.name, "shape": list(value.shape), "offset": offset,
                        "nbytes": len(data)})  # fmt: skip
        blobs.append(data)
        offset += len(data)
    header = json.dumps({**fields, "tensors": entries}, allow_nan=False, separators=(",", ":")).encode()
    return _PREFIX.pack(MAGIC, PROTOCOL_VERSION, int(kind), len(header)) + header + b"".join(blobs)


def _tensor(entry: Any, payload: memoryview) -> tuple[str, npt.NDArray[Any]]:
    if not isinstance(entry, dict):
        raise ProtocolError("tensor entry is not an object")
    name, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
    offset, nbytes = entry.get("offset"), entry.get("nbytes")
    if not isinstance(name, str):
        raise ProtocolError("tensor entry without a string name")
    if dtype not in DTYPES:
        raise ProtocolError(f"tensor {name!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise ProtocolError(f"tensor {name!r}: shape {shape!r} is not a list of at most {MAX_DIMS} sizes")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (offset, nbytes)):
        raise ProtocolError(f"tensor {name!r}: offset/nbytes must be non-negative integers")
    assert isinstance(offset, int) and isinstance(nbytes, int)
    np_dtype = np.dtype(dtype).newbyteorder("<")
    if math.prod(n for n in shape if n) > MAX_MESSAGE_BYTES:  # numpy cannot even describe such a shape, empty or not
        raise ProtocolError(f"tensor {name!r}: dimensions {tuple(shape)} exceed any frame of {MAX_MESSAGE_BYTES} bytes")
    if math.prod(shape) * np_dtype.itemsize != nbytes:
        raise ProtocolError(f"tensor {name!r}: {nbytes} bytes do not hold {dtype} {tuple(shape)}")
    if offset + nbytes > len(payload):
        raise ProtocolError(f"tensor {name!r}: bytes {offset}..{offset + nbytes} lie beyond the payload")
    array = np.frombuffer(payload[offset : offset + nbytes], dtype=np_dtype).reshape(shape)
    return name, array.astype(np.dtype(dtype), copy=False)


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def json_depth(text: bytes) -> int:
    """How deep arrays and objects nest in JSON `text` (brackets inside strings do not count), without parsing it:
    json.loads recurses once per level and a deep enough header would exhaust the interpreter's stack."""
    if text.count(b"[") + text.count(b"{") <= MAX_JSON_DEPTH:
        return 0  # cannot nest deeper than the limit
    codes = np.frombuffer(_JSON_STRING.sub(b'""', text), dtype=np.uint8)
    steps = np.isin(codes, (ord("["), ord("{"))).astype(np.int64) - np.isin(codes, (ord("]"), ord("}")))
    return int(np.cumsum(steps).max(initial=0))


def _unframe(data: bytes, expected: Kind) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
    if len(data) < _PREFIX.size:
        raise ProtocolError(f"frame of {len(data)} bytes is shorter than its {_PREFIX.size}-byte prefix")
    magic, version, kind, header_len = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise ProtocolError("not a lerobot_policy_server frame (bad magic)")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"peer speaks protocol version {version}, this side {PROTOCOL_VERSION}; install the same "
            "lerobot-policy-server version on both hosts",
            ErrorCode.FAILED_PRECONDITION,
        )
    if kind != expected:
        raise ProtocolError(f"expected a {expected.name} frame, got kind {kind}")
    if header_len > MAX_HEADER_BYTES or _PREFIX.size + header_len > len(data):
        raise ProtocolError(f"header length {header_len} does not fit the {len(data)}-byte frame")
    view = memoryview(data)
    text = bytes(view[_PREFIX.size : _PREFIX.size + header_len])
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ProtocolError(f"header nested deeper than {MAX_JSON_DEPTH} levels ({depth})")
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ProtocolError(f"header is not UTF-8 JSON: {err}") from None
    if not isinstance(header, dict) or not isinstance(header.get("tensors"), list):
        raise ProtocolError("header is not an object with a 'tensors' list")
    payload = view[_PREFIX.size + header_len :]
    tensors = dict(_tensor(entry, payload) for entry in header.pop("tensors"))
    return header, tensors


def _get(header: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = header.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ProtocolError(f"field {name!r} is missing or not of type {kind}")
    return value


def _names(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"field {what!r} must be a list of strings")
    return tuple(value)


def encode_info_request() -> bytes:
    return _frame(Kind.INFO_REQUEST, {})


def decode_info_request(data: bytes) -> None:
    _unframe(data, Kind.INFO_REQUEST)


def encode_reset_request() -> bytes:
    return _frame(Kind.RESET_REQUEST, {})


def decode_reset_request(data: bytes) -> None:
    _unframe(data, Kind.RESET_REQUEST)


def encode_reset_reply() -> bytes:
    return _frame(Kind.RESET_REPLY, {})


def decode_reset_reply(data: bytes) -> None:
    _unframe(data, Kind.RESET_REPLY)


def public_name(name: str) -> str:
    """A policy's name as Info gives it: an absolute path's last part (where the checkpoint lies is the server's)."""
    return PurePath(name).name if PurePath(name).is_absolute() or name.startswith("~") else name


def encode_info(info: PolicyInfo) -> bytes:
    """The Info reply: what a client needs to run the policy (inputs, actions, chunk length, fps, the contract);
    no paths and no library versions."""
    fields = {
        "policy_type": info.policy_type,
        "name": public_name(info.name),
        "backend": info.backend,
        "device": info.device,
        "inputs": [{"key": f.key, "shape": list(f.shape), "dtype": f.dtype, "visual": f.visual} for f in info.inputs],
        "action_dim": info.action_dim,
        "horizon": info.horizon,
        "action_names": list(info.action_names),
        "fps": info.fps,
        "language": info.language,
        "contract": None if info.contract is None else dict(info.contract),
        "image_encodings": list(info.image_encodings),
    }
    return _frame(Kind.INFO_REPLY, fields)


def decode_info(data: bytes) -> PolicyInfo:
    header, _ = _unframe(data, Kind.INFO_REPLY)
    inputs = []
    for entry in _get(header, "inputs", list):
        if not isinstance(entry, dict):
            raise ProtocolError("field 'inputs' must hold objects")
        shape = _get(entry, "shape", list)
        if not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ProtocolError(f"input {entry.get('key')!r}: bad shape {shape!r}")
        dtype = _get(entry, "dtype", str)
        if dtype not in DTYPES:
            raise ProtocolError(f"input {entry.get('key')!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        inputs.append(FeatureSpec(_get(entry, "key", str), tuple(shape), dtype, bool(_get(entry, "visual", bool))))
    fps = header.get("fps")
    if fps is not None and (not isinstance(fps, (int, float)) or isinstance(fps, bool) or not fps > 0):
        raise ProtocolError(f"field 'fps' must be a positive number or null, got {fps!r}")
    contract = header.get("contract")
    if contract is not None and not isinstance(contract, dict):
        raise ProtocolError("field 'contract' must be an object or null")
    action_dim, horizon = _get(header, "action_dim", int), _get(header, "horizon", int)
    if action_dim < 1 or horizon < 1:
        raise ProtocolError(f"action_dim {action_dim} and horizon {horizon} must be >= 1")
    return PolicyInfo(
        policy_type=_get(header, "policy_type", str),
        name=_get(header, "name", str),
        backend=_get(header, "backend", str),
        device=_get(header, "device", str),
        inputs=tuple(inputs),
        action_dim=action_dim,
        horizon=horizon,
        action_names=_names(header.get("action_names", []), "action_names"),
        fps=None if fps is None else float(fps),
        language=bool(_get(header, "language", bool)),
        contract=contract,
        image_encodings=_names(header.get("image_encodings", [RAW]), "image_encodings"),
    )


def encode_predict_request(request: PredictRequest) -> bytes:
    fields: dict[str, Any] = {"stamp_ns": int(request.stamp_ns), "task": request.task}
    tensors = dict(request.observation)
    if request.images:
        fields["images"] = {}
        for key, image in request.images.items():
            if image.encoding not in COMPRESSED:
                raise ProtocolError(f"image {key!r}: encoding {image.encoding!r} is not one of {', '.join(COMPRESSED)}")
            if key in tensors:
                raise ProtocolError(f"{key!r} is both an array and a compressed image; send it once")
            fields["images"][key] = image.encoding
            tensors[key] = np.frombuffer(image.data, dtype=np.uint8)
    return _frame(Kind.PREDICT_REQUEST, fields, tensors)


def decode_predict_request(data: bytes) -> PredictRequest:
    header, tensors = _unframe(data, Kind.PREDICT_REQUEST)
    encodings = header.get("images", {})
    if not isinstance(encodings, dict):
        raise ProtocolError("field 'images' must map tensor names to encodings")
    images = {}
    for key, encoding in encodings.items():
        if encoding not in COMPRESSED:
            raise ProtocolError(f"image {key!r}: encoding {encoding!r} is not one of {', '.join(COMPRESSED)}")
        value = tensors.pop(key, None)
        if value is None or value.dtype != np.uint8 or value.ndim != 1:
            shape = None if value is None else (value.dtype.name, value.shape)
            raise ProtocolError(f"image {key!r}: needs a 1-D uint8 tensor of {encoding} bytes, got {shape}")
        images[key] = EncodedImage(encoding, value.tobytes())
    return PredictRequest(_get(header, "stamp_ns", int), _get(header, "task", str), tensors, images)


def encode_predict_reply(reply: PredictReply) -> bytes:
    fields = {
        "stamp_ns": int(reply.stamp_ns),
        "task": reply.task,
        "inference_time_s": float(reply.inference_time_s),
        "action_names": list(reply.action_names),
    }
    return _frame(Kind.PREDICT_REPLY, fields, {"actions": reply.actions})


def decode_predict_reply(data: bytes) -> PredictReply:
    header, tensors = _unframe(data, Kind.PREDICT_REPLY)
    actions = tensors.get("actions")
    if actions is None or actions.ndim != 2 or actions.dtype.kind != "f":
        shape = None if actions is None else (actions.dtype, actions.shape)
        raise ProtocolError(f"reply needs a 2-D float 'actions' tensor, got {shape}")
    seconds = _get(header, "inference_time_s", (int, float))
    return PredictReply(
        stamp_ns=_get(header, "stamp_ns", int),
        task=_get(header, "task", str),
        actions=actions,
        inference_time_s=float(seconds),
        action_names=_names(header.get("action_names", []), "action_names"),
    )


def encode_stats_request() -> bytes:
    return _frame(Kind.STATS_REQUEST, {})


def decode_stats_request(data: bytes) -> None:
    _unframe(data, Kind.STATS_REQUEST)


def encode_stats_reply(fields: Mapping[str, Any]) -> bytes:
    return _frame(Kind.STATS_REPLY, fields)


def decode_stats_reply(data: bytes) -> dict[str, Any]:
    """The server's counts (``counts``: name -> int) and limits (``limits``)."""
    header, _ = _unframe(data, Kind.STATS_REPLY)
    counts = header.get("counts")
    if not isinstance(counts, dict) or not all(isinstance(v, int) for v in counts.values()):
        raise ProtocolError("field 'counts' must map names to integers")
    return header


def check_request_size(inputs: tuple[FeatureSpec, ...], request: PredictRequest) -> None:
    """ProtocolError (RESOURCE_EXHAUSTED) when a request's tensors (raw or compressed) hold more bytes than the
    policy's inputs do as raw tensors (a sixteenth more for compressed images that do not compress), checked
    before anything is decoded or copied."""
    needed = sum(math.prod(spec.shape) * np.dtype(spec.dtype).itemsize for spec in inputs)
    sent = sum(value.nbytes for value in request.observation.values())
    sent += sum(len(image.data) for image in getattr(request, "images", {}).values())
    if sent > needed + needed // 16 + 65536:
        raise ProtocolError(
            f"the request's tensors hold {sent} bytes, more than the policy's inputs need ({needed})",
            ErrorCode.RESOURCE_EXHAUSTED,
        )


def check_observation(inputs: tuple[FeatureSpec, ...], observation: Mapping[str, npt.NDArray[Any]]) -> None:
    """ProtocolError naming the first input that is missing or not of its declared dtype and shape."""
    for spec in inputs:
        value = observation.get(spec.key)
        if value is None:
            raise ProtocolError(f"observation lacks {spec.key!r}; the policy needs {[s.key for s in inputs]}")
        spec.check(value)
