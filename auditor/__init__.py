"""auditor: audit text-to-image models for social bias and incidental correlations.

The package keeps its import light: heavy libraries (torch, diffusers, transformers)
are imported inside the backends that need them, so `auditor --help` starts fast.
"""

__version__ = "0.1.0"
