"""Errors raised while reading bags and converting them."""

from __future__ import annotations


class BagError(Exception):
    """A bag cannot be converted as asked: names the bag and what is wrong (and how to fix it).

    Always one line: names taken from a bag (topics, types, paths) may hold line breaks, which are escaped.
    """

    def __init__(self, message: object = "") -> None:
        super().__init__(str(message).replace("\r", "\\r").replace("\n", "\\n"))


class DiskFullError(BagError):
    """The disk filled while writing the dataset: says where, how much is free and about how much is needed."""
