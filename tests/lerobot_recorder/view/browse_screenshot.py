"""`python browse_screenshot.py URL OUT.png`: open URL in headless Chromium, wait for the dataset view's picture and
plots (test_view_browser.wait_for_picture), save the screenshot. Run inside a network namespace by
test_view_browser.py, where the browser must reach an address that exists only there."""

from __future__ import annotations

import sys
from pathlib import Path

from browser import HeadlessPage
from PIL import Image
from test_view_browser import wait_for_picture


def main(url: str, out: Path) -> None:
    page = HeadlessPage(url, out.with_suffix(".chromium.log"))
    try:
        Image.fromarray(wait_for_picture(page)).save(out)
    finally:
        page.close()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
