"""The method names, importable without numpy: the CLI's help lists them before any method loads."""

from __future__ import annotations

METHOD_NAMES = ("target", "sd", "specasr", "as2d")
"""Every method of specbench.core.methods.REGISTRY, in its order (tests/test_startup.py keeps the two equal)."""
