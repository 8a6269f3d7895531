"""Where a view goes: a spawned Rerun viewer, a running one (`--connect`), the web viewer (`--web`), or a file.

Shared by `lerobot-ros view` and `lerobot-ros dataset view`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import rerun as rr

# Rerun's own defaults (the viewer listens on 9876; the web viewer is served on 9090).
DEFAULT_GRPC_PORT = 9876
DEFAULT_WEB_PORT = 9090
ALTERNATIVES = (
    "save a file with --save FILE.rrd (open it later with `rerun FILE.rrd`) or serve the web viewer with --web"
)


class ViewerUnavailableError(Exception):
    """No way to show the view as asked (no display for a viewer window, no viewer executable)."""


@dataclass(frozen=True)
class SinkChoice:
    """How the view is shown (exactly one of spawn, connect, web, save)."""

    connect: str | None = None
    web: bool = False
    web_port: int = DEFAULT_WEB_PORT
    grpc_port: int = DEFAULT_GRPC_PORT
    save: Path | None = None

    @property
    def spawn(self) -> bool:
        return self.connect is None and not self.web and self.save is None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SinkChoice:
        return cls(
            connect=args.connect,
            web=bool(args.web),
            web_port=int(args.port),
            grpc_port=int(args.grpc_port),
            save=args.save,
        )


def viewer_executable() -> str | None:
    """The `rerun` viewer installed next to this interpreter (rerun-sdk's), or on PATH."""
    local = Path(sys.executable).parent / "rerun"
    return str(local) if local.exists() else shutil.which("rerun")


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_sink(rec: rr.RecordingStream, choice: SinkChoice) -> str:
    """Attach `rec` to the chosen sink; returns one line saying where the view is.

    Raises ViewerUnavailableError when a viewer window cannot be opened here, and ValueError for a --save path
    that cannot be written.
    """
    if choice.save is not None:
        path = Path(choice.save)
        if path.suffix != ".rrd":
            raise ValueError(f"--save {path}: the file name must end in .rrd")
        if not path.parent.is_dir():
            raise ValueError(f"--save {path}: folder {path.parent} does not exist")
        rec.save(path)
        return f"saving the view to {path} (open it with: rerun {path})"
    if choice.connect is not None:
        rec.connect_grpc(choice.connect)
        return f"sending the view to the Rerun viewer at {choice.connect}"
    if choice.web:
        for port in (choice.web_port, choice.grpc_port):
            if not 0 < port < 65536:
                raise ValueError(f"port {port} is not a TCP port (1..65535)")
        uri = rec.serve_grpc(grpc_port=choice.grpc_port, cors_allow_origin=[f"http://*:{choice.web_port}"])
        rr.serve_web_viewer(web_port=choice.web_port, open_browser=False, connect_to=uri)
        host = socket.gethostname()
        data = quote(f"rerun+http://{host}:{choice.grpc_port}/proxy", safe="")
        return (
            f"web viewer at http://{host}:{choice.web_port}/?url={data} "
            f"(on this machine: http://127.0.0.1:{choice.web_port}/?url={quote(uri, safe='')})"
        )
    executable = viewer_executable()
    if executable is None:
        raise ViewerUnavailableError(f"no Rerun viewer executable (`rerun`) is installed; {ALTERNATIVES}")
    if not has_display():
        raise ViewerUnavailableError(
            f"no display for a viewer window (DISPLAY and WAYLAND_DISPLAY are unset); {ALTERNATIVES}, "
            "or send to a viewer running elsewhere with --connect URL"
        )
    rr.spawn(port=choice.grpc_port, connect=True, executable_path=executable, recording=rec)
    return f"spawned a Rerun viewer (port {choice.grpc_port})"
