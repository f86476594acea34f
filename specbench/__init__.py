"""specbench: does speculative decoding pay off on your phone, and by how much."""

from specbench.api import load_rows

__version__ = "0.1.0"
__all__ = ["__version__", "load_rows"]
