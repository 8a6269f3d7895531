"""Feature declarations (`FeatureSpec`) and the checks applied to every frame value.

A feature is one column of the dataset: a vector or scalar (`float32`, `float64`, `int64`,
`bool`), a `string`, or a camera (`video`: stored in mp4 files; `image`: PNG bytes inside the
data parquet). Shapes follow LeRobot: a scalar is `(1,)`, a camera is `(height, width, 3)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lerobot_dataset.errors import FeatureError

if TYPE_CHECKING:
    from lerobot_contract import Contract

NUMERIC_DTYPES = ("float32", "float64", "int64", "bool")
CAMERA_DTYPES = ("video", "image")
DTYPES = (*NUMERIC_DTYPES, "string", *CAMERA_DTYPES)
CAMERA_NAMES = ["height", "width", "channels"]

# Added to every dataset by the writer, in this order, after the user features (as LeRobot's create()).
BOOKKEEPING_DTYPES: dict[str, str] = {
    "timestamp": "float32",
    "frame_index": "int64",
    "episode_index": "int64",
    "index": "int64",
    "task_index": "int64",
}


@dataclass(frozen=True)
class FeatureSpec:
    """One dataset feature: dtype, shape and optional per-dimension names.

    `dtype` is one of 'float32', 'float64', 'int64', 'bool', 'string', 'video', 'image'.
    Cameras ('video'/'image') take `shape=(height, width, 3)` and uint8 frames; their names
    default to LeRobot's `["height", "width", "channels"]`.
    """

    dtype: str
    shape: tuple[int, ...]
    names: list[str] | None = None
    info: dict[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise FeatureError(f"dtype {self.dtype!r} is not supported; use one of {', '.join(DTYPES)}")
        shape = tuple(self.shape)
        if not shape or not all(isinstance(d, (int, np.integer)) and d > 0 for d in shape):
            raise FeatureError(f"shape {self.shape!r} must be a non-empty tuple of positive ints (a scalar is (1,))")
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        if self.is_camera:
            if len(shape) != 3 or shape[2] != 3:
                raise FeatureError(f"a {self.dtype} feature needs shape (height, width, 3), got {self.shape!r}")
            if self.names is None:
                object.__setattr__(self, "names", list(CAMERA_NAMES))
        elif len(shape) != 1:
            raise FeatureError(
                f"shape {self.shape!r}: only 1-D vectors and scalars (1,) are supported for {self.dtype} features; "
                "flatten the value and list the element names"
            )
        if self.dtype == "string" and shape != (1,):
            raise FeatureError(f"a string feature has shape (1,), got {self.shape!r}")
        if self.names is not None and not self.is_camera and len(self.names) != shape[0]:
            raise FeatureError(f"names has {len(self.names)} entries but shape is {self.shape!r}")

    @property
    def is_camera(self) -> bool:
        """True for 'video' and 'image' features."""
        return self.dtype in CAMERA_DTYPES

    @property
    def is_video(self) -> bool:
        return self.dtype == "video"

    def to_info(self) -> dict[str, Any]:
        """The entry of info.json `features` for this feature."""
        entry: dict[str, Any] = {"dtype": self.dtype, "shape": list(self.shape), "names": self.names}
        if self.info is not None:
            entry["info"] = dict(self.info)
        return entry

    @classmethod
    def from_info(cls, key: str, entry: Mapping[str, Any]) -> FeatureSpec:
        """Parse an info.json `features` entry; raises FeatureError naming the key."""
        try:
            names = entry.get("names")
            if isinstance(names, dict):  # some converted datasets store {"motors": [...]}
                values = list(names.values())
                names = values[0] if len(values) == 1 else None
            return cls(
                dtype=str(entry["dtype"]),
                shape=tuple(int(d) for d in entry["shape"]),
                names=list(names) if names is not None else None,
                info=dict(entry["info"]) if entry.get("info") is not None else None,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise FeatureError(f"feature {key!r} in info.json is malformed: {err}") from None

    def same_schema(self, other: FeatureSpec) -> bool:
        """Equal dtype, shape and names (video `info` is ignored)."""
        return (self.dtype, self.shape, self.names) == (other.dtype, other.shape, other.names)


def feature_specs(contract: Contract, *, video: bool = True) -> dict[str, FeatureSpec]:
    """The dataset schema of a robot contract: one FeatureSpec per contract feature, in contract order.

    With `video` off, camera features are stored as PNG images (`image`) instead of mp4 (`video`).
    """
    specs: dict[str, FeatureSpec] = {}
    for key, feat in contract.features.items():
        if feat.dtype == "depth":
            # The v3 writer stores 1-D vectors only: depth is a flat float32 row (metres, row-major).
            specs[key] = FeatureSpec("float32", (feat.shape[0] * feat.shape[1],), None)
        elif feat.is_image:
            dtype = feat.dtype if video or feat.dtype != "video" else "image"
            specs[key] = FeatureSpec(dtype, tuple(feat.shape), feat.dataset_names)
        else:
            specs[key] = FeatureSpec(feat.dtype, (feat.size,), feat.dataset_names)
    return specs


def validate_feature_key(key: str) -> None:
    """Feature names become column names and path parts: no '/', not empty, not a bookkeeping name."""
    if not key or "/" in key:
        raise FeatureError(f"feature name {key!r} is invalid: it must be non-empty and contain no '/'")
    if key in BOOKKEEPING_DTYPES or key == "task":
        raise FeatureError(f"feature name {key!r} is reserved: the writer adds it to every frame")


def bookkeeping_features() -> dict[str, FeatureSpec]:
    """The five features LeRobot adds to every dataset."""
    return {key: FeatureSpec(dtype, (1,)) for key, dtype in BOOKKEEPING_DTYPES.items()}


def coerce_value(key: str, spec: FeatureSpec, value: object) -> Any:
    """Check one frame value against its feature and return it in the stored dtype.

    Numeric features come back as a 1-D numpy array of the feature's dtype, cameras as a
    (H, W, 3) uint8 array, strings as str. Raises FeatureError naming the key on a wrong
    shape, a lossy dtype or a non-finite/invalid value kind.
    """
    if spec.dtype == "string":
        if not isinstance(value, str):
            raise FeatureError(f"feature {key!r} is a string feature; got {type(value).__name__}")
        return value
    arr = np.asarray(value)
    if spec.is_camera:
        if arr.dtype != np.uint8:
            raise FeatureError(f"feature {key!r}: camera frames must be uint8 (H, W, 3) RGB; got dtype {arr.dtype}")
        if arr.shape != spec.shape:
            raise FeatureError(f"feature {key!r}: frame shape {arr.shape} differs from the declared {spec.shape}")
        return np.ascontiguousarray(arr)
    if arr.dtype.kind not in "biuf":
        raise FeatureError(f"feature {key!r}: expected a numeric value of dtype {spec.dtype}; got dtype {arr.dtype}")
    arr = arr.reshape(-1) if arr.ndim == 0 else arr
    if arr.shape != spec.shape:
        raise FeatureError(f"feature {key!r}: value shape {arr.shape} differs from the declared {spec.shape}")
    if spec.dtype == "bool":
        if arr.dtype.kind != "b":
            raise FeatureError(f"feature {key!r} is bool; got dtype {arr.dtype} (pass a bool array)")
        return arr.astype(np.bool_, copy=False)
    if spec.dtype == "int64":
        if arr.dtype.kind not in "biu":
            raise FeatureError(f"feature {key!r} is int64; got dtype {arr.dtype} (round explicitly if intended)")
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "b":
        raise FeatureError(f"feature {key!r} is {spec.dtype}; got a bool value")
    return arr.astype(np.dtype(spec.dtype), copy=False)


def arrow_type(spec: FeatureSpec) -> pa.DataType:
    """The Arrow type of a feature's data-parquet column (video features have no column)."""
    if spec.dtype == "image":
        return pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    if spec.dtype == "string":
        return pa.string()
    scalar = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}[spec.dtype]
    if spec.shape == (1,):
        return scalar
    return pa.list_(scalar, spec.shape[0])


def hf_feature(spec: FeatureSpec) -> dict[str, Any]:
    """The Hugging Face `datasets` (4.x) feature JSON for a column, stored as parquet schema metadata."""
    if spec.dtype == "image":
        return {"_type": "Image"}
    value = {"dtype": spec.dtype, "_type": "Value"}
    if spec.shape == (1,):
        return value
    return {"feature": value, "length": spec.shape[0], "_type": "List"}


def numpy_dtype(spec: FeatureSpec) -> npt.DTypeLike:
    """Numpy dtype of a numeric feature's values."""
    return np.dtype(spec.dtype)
