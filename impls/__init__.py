"""DistRepro implementation library.

Importable, side-effect free: nothing here parses arguments, starts processes or
touches the file system at import time.  The runtime entry point that torchrun
starts is :mod:`impls.run`; the Snakemake workflow under ``workflows/`` drives it.
"""

__version__ = "0.1.0"
