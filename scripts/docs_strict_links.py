"""MkDocs hook: a link to a page left out of the site (`exclude_docs`) fails `--strict` like a missing page.

MkDocs reports such a link at INFO whatever `validation` says, yet on the built site it leads nowhere (the pages
under docs/benchmarks/notes/ are excluded: their text appears inside the generated benchmark pages, whose links
are benchmarks/<name>.md). This raises that report to a WARNING, which `--strict` counts.
"""

from __future__ import annotations

import logging
from typing import Any

EXCLUDED = "which is excluded from the built site"


class LinksToExcludedPages(logging.Filter):
    """Raises MkDocs' report of a link to an excluded page from INFO to WARNING."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING and EXCLUDED in record.getMessage():
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def on_config(config: Any) -> Any:
    pages = logging.getLogger("mkdocs.structure.pages")
    if not any(isinstance(f, LinksToExcludedPages) for f in pages.filters):  # `mkdocs serve` rebuilds
        pages.addFilter(LinksToExcludedPages())
    return config
