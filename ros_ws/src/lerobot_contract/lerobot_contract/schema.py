"""The contract: one YAML file that maps ROS topics to LeRobot features (DESIGN.md section 4).

```yaml
robot_type: so101_follower
fps: 30
stamp: header               # or receive: which clock places a message in time
sync_tolerance_s: 0.05      # optional: max spread between the samples of one frame
units:                      # named converters (see units.py); rad_to_deg, deg_to_rad, identity are built in
  gripper_0_100: {kind: range, in: [-0.1745, 1.7453], out: [0, 100]}
  lerobot_so101: {kind: per_joint, default: rad_to_deg, joints: {gripper: gripper_0_100}}
features:
  observation.state:
    topic: /follower/joint_states
    type: sensor_msgs/msg/JointState
    field: position          # dotted path into the message (or a list of paths; numbers index arrays:
                             # [poses.0.position.x, poses.0.position.y]), values concatenated in order
    joints: [shoulder_pan, ..., gripper]      # picked by name from the message's `name` list, in this order
    names: [shoulder_pan.pos, ..., gripper.pos]
    units: lerobot_so101
    max_age_s: 0.05
  observation.images.front:
    topic: /cameras/front/image_raw
    type: sensor_msgs/msg/Image       # or CompressedImage
    shape: [480, 640, 3]
    dtype: video                      # or image (PNG in parquet), or depth (float32 metres, no video)
```
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from lerobot_contract import images
from lerobot_contract.errors import ContractError, MessageMismatchError, NonFiniteValueError
from lerobot_contract.units import JointUnits, UnitConverter, parse_units
from lerobot_ros.bounded_yaml import load_yaml

STAMP_SOURCES = ("header", "receive")
IMAGE_TYPES = (images.IMAGE_TYPE, images.COMPRESSED_IMAGE_TYPE)
IMAGE_DTYPES = ("video", "image", "depth")
VECTOR_DTYPES = ("float32", "float64")
FEATURE_KEYS = {
    "topic",
    "type",
    "field",
    "joints",
    "joint_names_field",
    "names",
    "units",
    "shape",
    "dtype",
    "max_age_s",
    "depth_scale_m",
}
# Frame rates a contract may declare: the frame grid of the recorder, bag2dataset and the policy node is sized by
# fps (1e9 once made bag2dataset write ~700 MB/min of spill); 1000 Hz is above any camera or arm loop we record.
MIN_FPS, MAX_FPS = 1, 1000
TOP_KEYS = {"robot_type", "fps", "stamp", "sync_tolerance_s", "units", "features", "description"}
# Bookkeeping columns the dataset writer adds itself.
RESERVED_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index", "task")
# rmw's RMW_TOPIC_MAX_NAME_LENGTH (255 - 8: DDS adds the "rt" prefix and more to the 255 it allows).
MAX_TOPIC_NAME_LENGTH = 255 - 8


def topic_name_problem(name: str) -> str | None:
    """What is wrong with `name` as a fully qualified ROS topic name (None when nothing), by rmw's rules
    (`rmw_validate_full_topic_name`, what rclpy's `validate_full_topic_name` applies), checked in rmw's order:
    absolute, no trailing '/', only ASCII letters, digits, '_' and '/', no '//', no token starting with a digit,
    at most `MAX_TOPIC_NAME_LENGTH` characters. Pure: the contract needs no rclpy."""
    if not name:
        return "topic name must not be empty"
    if name[0] != "/":
        return "topic name must be absolute, it must lead with a '/'"
    if name[-1] == "/":
        return "topic name must not end with a '/'"
    for index, char in enumerate(name):
        if not (char.isascii() and (char.isalnum() or char in "_/")):
            return f"topic name must not contain characters other than alphanumerics, '_', or '/' ({char!r} at {index})"
    for index in range(1, len(name)):
        if name[index - 1] == "/" and name[index] == "/":
            return f"topic name must not contain repeated '/' (at {index})"
        if name[index - 1] == "/" and name[index].isdigit():
            return f"topic name must not have a token that starts with a number (at {index})"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name must not be longer than {MAX_TOPIC_NAME_LENGTH} characters (it has {len(name)})"
    return None


def normalize_type(msgtype: str) -> str:
    """``sensor_msgs/JointState`` -> ``sensor_msgs/msg/JointState`` (the rosbag2 spelling)."""
    parts = msgtype.split("/")
    if len(parts) == 2:
        return f"{parts[0]}/msg/{parts[1]}"
    return msgtype


def read_field(msg: Any, path: str) -> Any:
    """The value at dotted `path` inside `msg`, a number indexing an array (MessageMismatchError names the part)."""
    value = msg
    for part in path.split("."):
        if part.isdigit():
            try:
                value = value[int(part)]
            except (IndexError, TypeError, KeyError):
                size = len(value) if hasattr(value, "__len__") else "not an array"
                raise MessageMismatchError(f"index {part} of path {path!r} is out of range ({size})") from None
            continue
        if not hasattr(value, part):
            raise MessageMismatchError(f"message {type(value).__name__} has no field {part!r} (path {path!r})")
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class FeatureContract:
    """One dataset feature and where it comes from."""

    key: str
    topic: str
    type: str
    field: str | tuple[str, ...] | None = None
    joints: tuple[str, ...] | None = None
    joint_names_field: str = "name"
    names: tuple[str, ...] | None = None
    units: str = "identity"
    shape: tuple[int, ...] = ()
    dtype: str = ""
    max_age_s: float | None = None
    depth_scale_m: float = 0.001
    source: str = "<memory>"
    converters: Mapping[str, UnitConverter] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = f"features.{self.key}"
        src = self.source
        if not self.key or "/" in self.key:
            raise ContractError(src, key, "feature keys must be non-empty and must not contain '/'")
        if self.key in RESERVED_KEYS:
            raise ContractError(src, key, f"{self.key!r} is a bookkeeping column the writer adds itself")
        if (problem := topic_name_problem(self.topic)) is not None:
            raise ContractError(src, f"{key}.topic", f"{problem}: {self.topic!r}; ROS refuses it")
        if self.type.count("/") != 2:
            raise ContractError(src, f"{key}.type", f"expected pkg/msg/Name, got {self.type!r}")
        if self.max_age_s is not None and not (self.max_age_s > 0 and math.isfinite(self.max_age_s)):
            raise ContractError(src, f"{key}.max_age_s", f"must be a positive number, got {self.max_age_s}")
        if self.is_image:
            self._check_image(key)
        else:
            self._check_vector(key)

    def _check_image(self, key: str) -> None:
        src = self.source
        if self.dtype not in IMAGE_DTYPES:
            raise ContractError(src, f"{key}.dtype", f"image features take one of {IMAGE_DTYPES}, got {self.dtype!r}")
        if self.dtype == "depth":
            if self.type != images.IMAGE_TYPE:
                raise ContractError(src, f"{key}.type", f"depth features need {images.IMAGE_TYPE}")
            if len(self.shape) != 2 or min(self.shape) <= 0:
                raise ContractError(src, f"{key}.shape", f"depth features need [height, width], got {list(self.shape)}")
        elif len(self.shape) != 3 or self.shape[2] != 3 or min(self.shape) <= 0:
            raise ContractError(src, f"{key}.shape", f"camera features need [height, width, 3], got {list(self.shape)}")
        for name in ("field", "joints", "names"):
            if getattr(self, name) is not None:
                raise ContractError(src, f"{key}.{name}", "not used by image features; remove it")

    def _check_vector(self, key: str) -> None:
        src = self.source
        if self.dtype not in VECTOR_DTYPES:
            raise ContractError(src, f"{key}.dtype", f"vector features take one of {VECTOR_DTYPES}, got {self.dtype!r}")
        if not self.field:
            raise ContractError(src, f"{key}.field", f"missing: which field of {self.type} holds the values?")
        for name, seq in (("joints", self.joints), ("names", self.names)):
            if seq is not None:
                if not seq:
                    raise ContractError(src, f"{key}.{name}", "must not be empty")
                if len(set(seq)) != len(seq):
                    dup = next(x for x in seq if seq.count(x) > 1)
                    raise ContractError(src, f"{key}.{name}", f"{dup!r} appears twice")
        if self.joints is not None and self.names is not None and len(self.joints) != len(self.names):
            raise ContractError(
                src, f"{key}.names", f"has {len(self.names)} entries but joints has {len(self.joints)}; they pair up"
            )
        size = len(self.joints or self.names or ())
        if size == 0:
            raise ContractError(src, key, "a vector feature needs `joints` or `names` (they fix its length)")
        if self.shape and self.shape != (size,):
            raise ContractError(src, f"{key}.shape", f"is {list(self.shape)} but there are {size} names")
        if self.units not in self.converters:
            known = ", ".join(sorted(self.converters))
            raise ContractError(src, f"{key}.units", f"unknown converter {self.units!r}; declared: {known}")
        conv = self.converters[self.units]
        stray = sorted(set(conv.joints) - set(self.joints)) if conv.kind == "per_joint" and self.joints else []
        if stray:
            raise ContractError(src, f"{key}.units", f"converter {self.units!r} names joints not listed: {stray}")

    @property
    def field_paths(self) -> tuple[str, ...]:
        """The dotted paths of `field` (one, or the list the contract gave)."""
        if self.field is None:
            return ()
        return (self.field,) if isinstance(self.field, str) else tuple(self.field)

    @property
    def is_image(self) -> bool:
        """True for Image/CompressedImage features (video, image or depth)."""
        return self.type in IMAGE_TYPES

    @property
    def is_visual(self) -> bool:
        """True for features stored as 3-channel pictures (video or image dtype)."""
        return self.is_image and self.dtype in ("video", "image")

    @property
    def dataset_names(self) -> list[str] | None:
        """Per-dimension names in the dataset."""
        if self.is_image:
            return ["height", "width", "channels"] if self.dtype != "depth" else ["height", "width"]
        return list(self.names or self.joints or ())

    @property
    def size(self) -> int:
        """Vector length (vector features)."""
        return len(self.names or self.joints or ())

    def joint_units(self) -> JointUnits:
        """The per-joint converters of this feature, in dataset order."""
        conv = self.converters[self.units]
        joints: Sequence[str | None] = self.joints or [None] * self.size
        return JointUnits(tuple(conv.converter_for(j, self.converters) for j in joints))

    def raw_vector(self, msg: Any) -> npt.NDArray[np.float64]:
        """The selected values of `msg` in ROS units, in contract order (float64).

        Raises NonFiniteValueError (a MessageMismatchError) when a selected value is NaN or +-inf: the
        sample is refused where it enters, so a frame holds the previous valid sample instead (values of
        joints the contract does not select are not looked at).
        """
        return self._finite(self._selected(msg))

    def _finite(self, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        finite = np.isfinite(values)
        if finite.all():
            return values
        labels = self.joints or self.names or tuple(str(i) for i in range(values.size))
        bad = [f"{labels[i]}={values[i]}" for i in np.flatnonzero(~finite)]
        raise NonFiniteValueError(
            f"{self.key}: {self.topic} carries non-finite value(s) {', '.join(bad)}; the sample is refused "
            "(the frame keeps the previous valid one)"
        )

    def _selected(self, msg: Any) -> npt.NDArray[np.float64]:
        parts = []
        for path in self.field_paths:
            try:
                raw = read_field(msg, path)
            except MessageMismatchError as err:
                raise MessageMismatchError(f"{self.key}: {self.topic}: {err}") from None
            try:
                parts.append(np.asarray(raw, dtype=np.float64).reshape(-1))
            except (TypeError, ValueError):
                raise MessageMismatchError(
                    f"{self.key}: field {path!r} of {self.topic} holds {type(raw).__name__}, not numbers"
                ) from None
        values = np.concatenate(parts) if len(parts) > 1 else parts[0]
        fields = ", ".join(self.field_paths)
        if self.joints is None:
            if values.size != self.size:
                raise MessageMismatchError(
                    f"{self.key}: field {fields!r} of {self.topic} has {values.size} values, contract expects "
                    f"{self.size}"
                )
            return values
        names = [str(n) for n in read_field(msg, self.joint_names_field)]
        if len(names) != values.size:
            raise MessageMismatchError(
                f"{self.key}: {self.topic} has {len(names)} names but {values.size} values in {fields!r}"
                + (" (the field is empty in this message)" if values.size == 0 else "")
            )
        index = {n: i for i, n in enumerate(names)}
        missing = [j for j in self.joints if j not in index]
        if missing:
            raise MessageMismatchError(
                f"{self.key}: joint(s) {missing} not in {self.topic} (the message names {names}); fix `joints` in "
                "the contract"
            )
        return values[[index[j] for j in self.joints]]

    def vector(self, msg: Any) -> npt.NDArray[np.floating[Any]]:
        """The feature vector for `msg`: joints selected by name, converted to dataset units.

        Raises NonFiniteValueError also when the conversion overflows (a finite 1e300 rad is no sample either).
        """
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
            out = self.joint_units().apply(self.raw_vector(msg)).astype(self.dtype)
        self._finite(out.astype(np.float64))
        return out

    def image_problem(self, msg: Any) -> str | None:
        """Why an image message of this feature cannot be used (None when it can), found without decoding it
        (`lerobot_contract.images.image_problem`): the recorder and the bag converter drop such an image and count
        the reason, as for any damaged message."""
        return images.image_problem(msg, self.type, self.shape, self.dtype == "depth")

    def picture(self, msg: Any) -> npt.NDArray[Any]:
        """The feature value of an image message: (H, W, 3) uint8, or (H, W) float32 metres for depth.

        Non-finite depth pixels (REP 118: NaN = no return, +-inf = out of range) are stored as 0, the
        "no reading" value of 16UC1 depth, so a depth feature never puts NaN into the dataset or its stats.
        A compressed image declaring more pixels than the contract's shape is refused before it is decoded.
        """
        if self.dtype == "depth":
            out: npt.NDArray[Any] = images.decode_depth(msg, self.type, self.depth_scale_m)
            if not np.isfinite(out).all():
                out = np.where(np.isfinite(out), out, np.float32(0.0)).astype(np.float32)
        else:
            out = images.decode_color(msg, self.type, max_pixels=self.shape[0] * self.shape[1])
        if tuple(out.shape) != self.shape:
            raise MessageMismatchError(
                f"{self.key}: {self.topic} carries {out.shape[1]}x{out.shape[0]} images but the contract declares "
                f"shape {list(self.shape)}; fix `shape` in the contract"
            )
        return out

    def value(self, msg: Any) -> npt.NDArray[Any]:
        """The dataset value of this feature for `msg` (depth pictures flattened row-major)."""
        if not self.is_image:
            return self.vector(msg)
        picture = self.picture(msg)
        return picture.reshape(-1) if self.dtype == "depth" else picture


@dataclass(frozen=True)
class Contract:
    """A validated contract (see the module docstring for the YAML shape)."""

    robot_type: str
    fps: int
    features: Mapping[str, FeatureContract]
    stamp: str = "header"
    sync_tolerance_s: float | None = None
    converters: Mapping[str, UnitConverter] = dataclasses.field(default_factory=dict, repr=False)
    source: str = "<memory>"
    raw: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        src = self.source
        if not self.robot_type:
            raise ContractError(src, "robot_type", "must be a non-empty string")
        if isinstance(self.fps, bool) or not isinstance(self.fps, int) or not MIN_FPS <= self.fps <= MAX_FPS:
            problem = f"must be an integer in {MIN_FPS}..{MAX_FPS} (frames per second), got {self.fps!r}"
            raise ContractError(src, "fps", problem)
        if self.stamp not in STAMP_SOURCES:
            raise ContractError(src, "stamp", f"must be one of {STAMP_SOURCES}, got {self.stamp!r}")
        tol = self.sync_tolerance_s
        if tol is not None and not (tol > 0 and math.isfinite(tol)):
            raise ContractError(src, "sync_tolerance_s", f"must be a positive number, got {tol}")
        if not self.features:
            raise ContractError(src, "features", "must declare at least one feature")

    def select(self, keys: Sequence[str]) -> Contract:
        """The same contract with only the features `keys` (e.g. what one policy reads, plus its action)."""
        unknown = sorted(set(keys) - set(self.features))
        if unknown:
            raise ContractError(self.source, "features", f"has no feature(s) {unknown}")
        raw = dict(self.raw)
        if isinstance(raw.get("features"), Mapping):
            raw["features"] = {k: v for k, v in raw["features"].items() if k in keys}
        features = {k: f for k, f in self.features.items() if k in keys}
        return dataclasses.replace(self, features=features, raw=raw)

    @classmethod
    def load(cls, path: str | Path) -> Contract:
        """Read and validate a contract file."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as err:
            raise ContractError(str(path), "<file>", f"cannot read: {err.strerror or err}") from None
        except UnicodeDecodeError as err:
            raise ContractError(
                str(path), "<file>", f"not UTF-8 text (byte {err.start}): a YAML file is expected"
            ) from None
        try:
            data = load_yaml(text)
        except yaml.YAMLError as err:
            # One line: PyYAML's message spans several (context, the quoted line, a caret).
            raise ContractError(str(path), "<file>", f"not valid YAML: {' '.join(str(err).split())}") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: object, source: str = "<memory>") -> Contract:
        """Validate a parsed contract mapping."""
        if not isinstance(data, Mapping):
            raise ContractError(source, "<file>", "must be a YAML mapping with robot_type, fps and features")
        if unknown := sorted(set(data) - TOP_KEYS):
            raise ContractError(source, unknown[0], f"unknown key; allowed: {', '.join(sorted(TOP_KEYS))}")
        for required in ("robot_type", "fps", "features"):
            if required not in data:
                raise ContractError(source, required, "missing")
        converters = parse_units(source, data.get("units"))
        raw_features = data["features"]
        if not isinstance(raw_features, Mapping):
            raise ContractError(source, "features", "must be a mapping of feature key -> definition")
        features = {str(k): _parse_feature(source, str(k), v, converters) for k, v in raw_features.items()}
        tol = data.get("sync_tolerance_s")
        return cls(
            robot_type=str(data["robot_type"]),
            fps=data["fps"],
            features=features,
            stamp=str(data.get("stamp", "header")),
            sync_tolerance_s=None if tol is None else _positive(source, "sync_tolerance_s", tol),
            converters=converters,
            source=source,
            raw=dict(data),
        )

    @property
    def topics(self) -> list[str]:
        """Every topic the contract reads, each once, in feature order."""
        return list(dict.fromkeys(f.topic for f in self.features.values()))

    def to_dict(self) -> dict[str, Any]:
        """The contract as plain data (stored with the dataset)."""
        return dict(self.raw)


def _positive(source: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ContractError(source, key, f"must be a number, got {value!r}")
    return float(value)


def _str_list(source: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ContractError(source, key, f"must be a list of strings, got {value!r}")
    return tuple(value)


def _parse_feature(source: str, key: str, spec: object, converters: Mapping[str, UnitConverter]) -> FeatureContract:
    fkey = f"features.{key}"
    if not isinstance(spec, Mapping):
        raise ContractError(source, fkey, "must be a mapping with topic and type")
    if unknown := sorted(set(spec) - FEATURE_KEYS):
        raise ContractError(source, f"{fkey}.{unknown[0]}", f"unknown key; allowed: {', '.join(sorted(FEATURE_KEYS))}")
    for required in ("topic", "type"):
        if not isinstance(spec.get(required), str):
            raise ContractError(source, f"{fkey}.{required}", "missing (a string is required)")
    msgtype = normalize_type(spec["type"])
    is_image = msgtype in IMAGE_TYPES
    shape_raw = spec.get("shape", [])
    if not isinstance(shape_raw, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in shape_raw):
        raise ContractError(source, f"{fkey}.shape", f"must be a list of integers, got {shape_raw!r}")
    if is_image and not shape_raw:
        raise ContractError(source, f"{fkey}.shape", "missing: image features need [height, width, 3]")
    default_field = "position" if msgtype == "sensor_msgs/msg/JointState" else None
    max_age = spec.get("max_age_s")
    depth_scale = spec.get("depth_scale_m", 0.001)
    units = spec.get("units", "identity")
    if not isinstance(units, str):
        raise ContractError(source, f"{fkey}.units", f"must name a converter, got {units!r}")
    field_name = spec.get("field", None if is_image else default_field)
    if isinstance(field_name, list):
        if not field_name or not all(isinstance(x, str) and x for x in field_name):
            raise ContractError(source, f"{fkey}.field", f"must be a dotted path or a list of them, got {field_name!r}")
        field_name = tuple(field_name)
    elif field_name is not None and not isinstance(field_name, str):
        raise ContractError(source, f"{fkey}.field", f"must be a dotted field path, got {field_name!r}")
    return FeatureContract(
        key=key,
        topic=spec["topic"],
        type=msgtype,
        field=field_name,
        joints=_str_list(source, f"{fkey}.joints", spec["joints"]) if "joints" in spec else None,
        joint_names_field=str(spec.get("joint_names_field", "name")),
        names=_str_list(source, f"{fkey}.names", spec["names"]) if "names" in spec else None,
        units=units,
        shape=tuple(shape_raw),
        dtype=str(spec.get("dtype", "video" if is_image else "float32")),
        max_age_s=None if max_age is None else _positive(source, f"{fkey}.max_age_s", max_age),
        depth_scale_m=_positive(source, f"{fkey}.depth_scale_m", depth_scale),
        source=source,
        converters=converters,
    )


def load_contract(path: str | Path) -> Contract:
    """Read and validate a contract file (raises ContractError naming file, key and problem)."""
    return Contract.load(path)
