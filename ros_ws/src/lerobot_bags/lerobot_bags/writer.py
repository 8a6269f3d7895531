"""rosbags' bag `Writer`, with the `ros_distro` rosbag2 itself writes in a bag's metadata.

rosbags writes ``ros_distro: rosbags`` into metadata.yaml and into the storage file's own copy of the metadata
(the mcap metadata record / the sqlite3 metadata table); rosbag2 writes the `ROS_DISTRO` of the process that
records. `Rosbag2Writer` writes `ros_distro()`: `ROS_DISTRO` when it is set, else the distribution of the ROS 2
wheels this workspace runs on.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from types import MappingProxyType

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Writer

ROS_WHEELS_DISTRO = "kilted"
_ROSBAGS_DISTRO = re.compile(r"^(\s*ros_distro: )rosbags$", re.MULTILINE)


def ros_distro(environ: Mapping[str, str] = os.environ) -> str:
    """The distribution a bag written here names: `ROS_DISTRO`, else that of the ROS 2 wheels (kilted)."""
    return environ.get("ROS_DISTRO") or ROS_WHEELS_DISTRO


def with_ros_distro(metadata: str, distro: str) -> str:
    """`metadata` (rosbag2 metadata YAML as rosbags writes it) naming `distro` instead of rosbags."""
    value = distro if re.fullmatch(r"[A-Za-z0-9_.-]+", distro) else json.dumps(distro)
    return _ROSBAGS_DISTRO.sub(lambda m: m.group(1) + value, metadata)


class _McapWriter(McapWriter):
    def close(self, version: int, metadata: str) -> None:
        super().close(version, with_ros_distro(metadata, ros_distro()))


class _Sqlite3Writer(Sqlite3Writer):
    def close(self, version: int, metadata: str) -> None:
        super().close(version, with_ros_distro(metadata, ros_distro()))


class Rosbag2Writer(Writer):
    """rosbags' `Writer` whose metadata (metadata.yaml and the storage file's copy) names `ros_distro()`."""

    STORAGE_PLUGINS = MappingProxyType({StoragePlugin.SQLITE3: _Sqlite3Writer, StoragePlugin.MCAP: _McapWriter})

    def close(self) -> None:
        super().close()
        text = with_ros_distro(self.metapath.read_text("utf8"), ros_distro())
        tmp = self.metapath.with_suffix(".yaml.tmp")
        tmp.write_text(text, "utf8")
        tmp.replace(self.metapath)
