"""Moved to :mod:`lessonbank.settings`; this name stays importable."""

from lessonbank.settings import Settings as Settings
