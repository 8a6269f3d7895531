"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol: open a page, take screenshots.

Rerun's web viewer renders with WebGL; headless Chromium has no GPU here, so it runs on SwiftShader, Chromium's
software rasterizer (`--use-angle=swiftshader --enable-unsafe-swiftshader`; the viewer then says "Software
rasterizer" in its top bar). Loading and compiling the viewer's WebAssembly takes tens of seconds on 2 cores.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HeadlessPage:
    """One Chromium page at `url`, screenshots on demand; `close()` ends the browser."""

    def __init__(self, url: str, log: Path, width: int = 1600, height: int = 1000) -> None:
        exe = chromium()
        if exe is None:
            raise RuntimeError("chromium is not installed")
        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="chromium-")
        self.proc = subprocess.Popen(
            [
                exe,
                "--headless=new",
                "--no-sandbox",
                "--use-angle=swiftshader",
                "--enable-unsafe-swiftshader",
                "--no-first-run",
                f"--window-size={width},{height}",
                f"--remote-debugging-port={self.port}",
                f"--user-data-dir={self.profile}",
                url,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        self.ws_url = self._page_socket()

    def _page_socket(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=2) as answer:
                    pages = [p for p in json.load(answer) if p.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"chromium gave no DevTools page within {timeout} s (exit {self.proc.poll()})")

    def screenshot(self, timeout: float = 60.0) -> np.ndarray:
        """The page as an (H, W, 3) uint8 RGB array (TimeoutError when the page does not answer in time)."""
        return asyncio.run(asyncio.wait_for(self._screenshot(), timeout))

    async def _screenshot(self) -> np.ndarray:
        import websockets
        from PIL import Image

        async with websockets.connect(self.ws_url, max_size=None) as ws:
            await ws.send(json.dumps({"id": 1, "method": "Page.captureScreenshot", "params": {"format": "png"}}))
            while True:
                message: dict[str, Any] = json.loads(await ws.recv())
                if message.get("id") == 1:
                    break
        png = base64.b64decode(message["result"]["data"])
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def pixels_near(image: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 10) -> int:
    """How many pixels are within `tolerance` of `rgb` in every channel."""
    diff = np.abs(image.astype(np.int16) - np.asarray(rgb, dtype=np.int16))
    return int((diff <= tolerance).all(axis=-1).sum())


def served_output(server: subprocess.Popen[str]) -> str:
    """What a `view --web` / `dataset view --web` process printed up to its "serving the web viewer" line."""
    assert server.stdout is not None
    lines = []
    for line in server.stdout:
        lines.append(line)
        if "serving the web viewer" in line:
            break
    return "".join(lines)
