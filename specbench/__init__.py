"""specbench: does speculative decoding pay off on your phone, and by how much."""

__version__ = "0.1.0"
