"""Read an .rrd file back with Rerun's own API (rerun.chunk.RrdReader): the entities the view tests check.

The view's tests check what the viewer would show by reading the recording itself, entity by entity, rather
than a screenshot of the viewer: Rerun's viewer (native and web) draws everything, entity names included,
into one GPU canvas (egui on wgpu/WebGL) with no DOM text, so a headless-browser screenshot could only be
checked by pixel comparison or OCR. The .rrd holds exactly what a viewer receives from the same code path.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rerun.chunk import RrdReader


@dataclass
class Entity:
    """All rows logged to one entity path: per column (e.g. `Scalars:scalars`), the values; per timeline, the
    times (None for static rows)."""

    path: str
    columns: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    times: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    static_rows: int = 0
    static_columns: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))

    @property
    def rows(self) -> int:
        return max((len(v) for v in self.columns.values()), default=0)

    def scalars(self, timeline: str | None = None) -> np.ndarray:
        """The non-static scalar values, in time order of `timeline` when given."""
        values = [v[0] for v in self.columns.get("Scalars:scalars", []) if v]
        if timeline is None:
            return np.asarray(values, dtype=np.float64)
        times = self.times[timeline]
        order = np.argsort(np.asarray(times, dtype=np.float64), kind="stable")
        return np.asarray(values, dtype=np.float64)[order]

    def texts(self) -> list[str]:
        """Text of the TextLog/TextDocument rows on the timelines."""
        return _texts(self.columns)

    @property
    def static_texts(self) -> list[str]:
        """Text of the static TextDocument rows (e.g. the task, the sync report)."""
        return _texts(self.static_columns)


def _texts(columns: dict[str, list[Any]]) -> list[str]:
    key = "TextLog:text" if "TextLog:text" in columns else "TextDocument:text"
    return [str(v[0]) if isinstance(v, list) else str(v) for v in columns.get(key, []) if v is not None]


def read_rrd(path: Path) -> dict[str, Entity]:
    """Entity path -> Entity for every recording chunk in `path`."""
    entities: dict[str, Entity] = {}
    for chunk in RrdReader(path).stream():
        name = str(chunk.entity_path)
        if name.startswith("/__"):
            continue  # Rerun's own properties
        entity = entities.setdefault(name, Entity(name))
        batch = chunk.to_record_batch()
        timelines = [t for t in chunk.timeline_names if t != "log_time" and t in batch.schema.names]
        if chunk.is_static:
            entity.static_rows += chunk.num_rows
        target = entity.static_columns if chunk.is_static else entity.columns
        for column in batch.schema.names:
            if column in ("rerun.controls.RowId", "log_time") or column in chunk.timeline_names:
                continue
            target[column].extend(batch.column(column).to_pylist())
        if chunk.is_static:
            continue
        for timeline in timelines:
            raw = batch.column(timeline)
            entity.times[timeline].extend(_time_values(raw))
    return entities


def _time_values(column: Any) -> list[float]:
    import pyarrow as pa

    if pa.types.is_timestamp(column.type) or pa.types.is_duration(column.type):
        return [v / 1e9 for v in column.cast(pa.int64()).to_pylist()]
    return [float(v) for v in column.to_pylist()]
