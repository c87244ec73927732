"""Check the config files named on a Snakemake command line before Snakemake reads them.

Snakemake parses ``--configfile`` itself, before the workflow starts, and reports a YAML
syntax error as "Config file is not valid JSON or YAML" without the file or the line.
``scripts/reproduce.sh`` therefore runs ``python -m distrepro_wf.precheck "$@"`` first:
it finds the ``--configfile``/``--configfiles`` arguments and reads each strictly
(:func:`distrepro_wf.config.check_config_files`), printing e.g.::

    invalid configuration: my.yaml: YAML syntax error: line 3, column 1: ...

and exiting 1.  Without such arguments (the default grid) it does nothing: the
Snakefile reads config/config.yaml strictly itself.
"""

from __future__ import annotations

import sys

from impls.errors import ConfigError

from .config import check_config_files

FLAGS = ("--configfile", "--configfiles")


def config_files(argv: list[str]) -> list[str]:
    """The files after ``--configfile(s)`` (space- or ``=``-separated, several allowed)."""
    files, taking = [], False
    for a in argv:
        flag, eq, value = a.partition("=")
        if flag in FLAGS:
            taking = not eq
            if eq:
                files.append(value)
        elif taking and not a.startswith("-"):
            files.append(a)
        else:
            taking = False
    return files


def main(argv: list[str] | None = None) -> int:
    try:
        check_config_files(config_files(sys.argv[1:] if argv is None else argv))
    except ConfigError as e:
        print(f"invalid configuration: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
