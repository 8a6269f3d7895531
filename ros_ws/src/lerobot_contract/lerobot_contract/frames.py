"""Aligned frame -> the value of every feature: the one decoder of the recorder, the bag converter and the policy node.

A pick's payload is whatever its sampler was given:

* a vector feature's payload is its values in dataset units, converted when the message came in (the recorder
  and the bag converter refuse a bad message there, before it can enter a frame); with ``convert_vectors`` (the
  policy node) it is the message itself, converted here;
* an image feature's payload is the message, or its serialized bytes when a `deserialize` function is given
  (only the images a frame uses are deserialized and decoded).

Each image message is decoded once, however many frames hold it. A linear-mode pick (`Pick.after`) blends two
vectors. A value that does not fit the contract raises MessageMismatchError (NonFiniteValueError for NaN/inf).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from lerobot_contract.align import AlignedFrame, Pick, Sample
from lerobot_contract.errors import MessageMismatchError, NonFiniteValueError
from lerobot_contract.schema import Contract

Deserialize = Callable[[Any, str], Any]


class FrameDecoder:
    """Picks of an aligned frame -> one numpy value per feature (see the module docstring); not thread-safe.

    Args:
        contract: the features the frames hold.
        deserialize: ``(raw, msgtype) -> message`` for image payloads that are serialized bytes.
        deserialize_errors: what `deserialize` raises for malformed bytes; reported as MessageMismatchError
            naming the feature (the frame is bad, the caller lives on).
        convert_vectors: vector payloads are messages, converted to dataset units here.
    """

    def __init__(
        self,
        contract: Contract,
        deserialize: Deserialize | None = None,
        *,
        deserialize_errors: tuple[type[Exception], ...] = (),
        convert_vectors: bool = False,
    ) -> None:
        self.features = contract.features
        self._deserialize = deserialize
        self._deserialize_errors = deserialize_errors
        self._convert_vectors = convert_vectors
        self._cache: dict[str, tuple[Sample, npt.NDArray[Any]]] = {}

    def build(self, frame: AlignedFrame) -> dict[str, npt.NDArray[Any]]:
        """Every feature's value of `frame`."""
        return {key: self.value(key, pick) for key, pick in frame.picks.items()}

    def value(self, key: str, pick: Pick) -> npt.NDArray[Any]:
        """The value of feature `key` for its pick."""
        feat = self.features[key]
        if not feat.is_image:
            if self._convert_vectors:
                values: Any = feat.vector(pick.sample.payload)
            else:
                values = pick.sample.payload
                if pick.after is not None:
                    values = values + pick.alpha * (pick.after.payload - values)
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
                vector = np.asarray(values, dtype=feat.dtype)
            if not np.isfinite(vector).all():
                # The contract refuses such samples where they enter; this guards any other way in.
                raise NonFiniteValueError(f"{key}: non-finite value(s) {vector.tolist()}; the frame is dropped")
            return vector
        cached = self._cache.get(key)
        if cached is None or cached[0] is not pick.sample:
            msg = pick.sample.payload
            if self._deserialize is not None:
                try:
                    msg = self._deserialize(msg, feat.type)
                except self._deserialize_errors as err:  # malformed bytes from a publisher: this frame is bad
                    raise MessageMismatchError(f"{key}: a {feat.type} message cannot be deserialized: {err}") from None
            cached = (pick.sample, feat.value(msg))
            self._cache[key] = cached
        return cached[1]

    def reset(self) -> None:
        """Forget decoded images (between episodes)."""
        self._cache.clear()
