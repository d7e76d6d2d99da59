"""The package version (one place; the distributions' metadata carries the same number)."""

__version__ = "0.1.0"
