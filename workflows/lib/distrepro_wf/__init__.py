"""Tested helpers behind the Snakemake workflow: config, launch, collect, report.

The workflow imports this package; :mod:`impls` never imports it.
"""
