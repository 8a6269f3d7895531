"""Where a view goes: a spawned Rerun viewer, a running one (`--connect`), the web viewer (`--web`), or a file.

Shared by `lerobot-ros view` and `lerobot-ros dataset view`. The web viewer listens on loopback unless `--host`
names another address, and then only with a token (lerobot_recorder.view.web).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import rerun as rr

from lerobot_recorder.view.web import (
    LOOPBACK,
    WebViewer,
    is_loopback,
    read_token,
    resolve_host,
    server_executable,
)

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
    host: str | None = None  # --web: the address to listen on (None: loopback)
    token_file: Path | None = None

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
            host=args.host,
            token_file=args.token_file,
        )


@dataclass
class Sink:
    """An opened sink: `where` tells the user where the view is; `close()` stops what the sink started."""

    where: str
    web: WebViewer | None = field(default=None, repr=False)

    def problem(self) -> str | None:
        """Why the sink stopped serving (the web viewer's server or proxy died), else None."""
        return self.web.problem() if self.web is not None else None

    def close(self) -> None:
        if self.web is not None:
            self.web.close()


def viewer_executable() -> str | None:
    """The `rerun` viewer installed next to this interpreter (rerun-sdk's), or on PATH."""
    local = Path(sys.executable).parent / "rerun"
    return str(local) if local.exists() else shutil.which("rerun")


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_sink(rec: rr.RecordingStream, choice: SinkChoice, environ: Mapping[str, str] | None = None) -> Sink:
    """Attach `rec` to the chosen sink; its `where` says where the view is.

    Raises ViewerUnavailableError when a viewer window cannot be opened here, ValueError for a --save path that
    cannot be written or web options that do not fit, WebViewerError when the web viewer cannot be served.
    """
    if not choice.web and (choice.host is not None or choice.token_file is not None):
        raise ValueError("--host and --token-file are options of --web")
    if choice.save is not None:
        path = Path(choice.save)
        if path.suffix != ".rrd":
            raise ValueError(f"--save {path}: the file name must end in .rrd")
        if not path.parent.is_dir():
            raise ValueError(f"--save {path}: folder {path.parent} does not exist")
        rec.save(path)
        return Sink(f"saving the view to {path} (open it with: rerun {path})")
    if choice.connect is not None:
        rec.connect_grpc(choice.connect)
        return Sink(f"sending the view to the Rerun viewer at {choice.connect}")
    if choice.web:
        return _open_web(rec, choice, os.environ if environ is None else environ)
    executable = viewer_executable()
    if executable is None:
        raise ViewerUnavailableError(f"no Rerun viewer executable (`rerun`) is installed; {ALTERNATIVES}")
    if not has_display():
        raise ViewerUnavailableError(
            f"no display for a viewer window (DISPLAY and WAYLAND_DISPLAY are unset); {ALTERNATIVES}, "
            "or send to a viewer running elsewhere with --connect URL"
        )
    rr.spawn(port=choice.grpc_port, connect=True, executable_path=executable, recording=rec)
    return Sink(f"spawned a Rerun viewer (port {choice.grpc_port})")


def _open_web(rec: rr.RecordingStream, choice: SinkChoice, environ: Mapping[str, str]) -> Sink:
    for flag, port in (("--port", choice.web_port), ("--grpc-port", choice.grpc_port)):
        if not 0 < port < 65536:
            raise ValueError(f"{flag} {port} is not a TCP port (1..65535)")
    if choice.web_port == choice.grpc_port:
        raise ValueError(f"--port and --grpc-port are both {choice.web_port}; give two different ports")
    executable = server_executable()
    if executable is None:
        raise ViewerUnavailableError("no Rerun executable (`rerun`, from rerun-sdk) is installed to serve the viewer")
    host = LOOPBACK if choice.host is None else choice.host
    public = not is_loopback(resolve_host(host))
    if choice.token_file is not None and not public:
        raise ValueError(
            f"--token-file: the web viewer on loopback ({host}) takes no token; it is for --host ADDRESS beyond it"
        )
    token = read_token(choice.token_file, environ) if public else None
    web = WebViewer(executable, host, choice.web_port, choice.grpc_port, token)
    rec.connect_grpc(web.data_url)
    return Sink(web.describe(), web)
