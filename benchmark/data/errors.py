"""Errors raised for bad benchmark data; each message names the file and says what to do."""

from __future__ import annotations


class DataError(ValueError):
    """A data file exists but its content is not in the PFL-DocVQA layout."""


class DataFileNotFoundError(DataError, FileNotFoundError):
    """A file the layout requires (split, data_points.json, page image) is missing."""
