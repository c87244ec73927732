"""Check the config files named on a Snakemake command line before Snakemake reads them.

Snakemake 9 reads every ``--configfile`` while it builds its settings from the command line
(``ConfigSettings``), before it parses the Snakefile, so no code of the Snakefile can come
first.  Its reader reports a YAML syntax error as "Config file is not valid JSON or YAML"
without the file or the line, a non-UTF-8 file as a raw ``UnicodeDecodeError`` traceback and
a self-referential document (``a: &a {b: *a}``) as a ``RecursionError`` traceback.  This
module finds the ``--configfile``/``--configfiles`` arguments and reads each strictly
(:func:`distrepro_wf.pipeline.config.check_config_files`: file, line, column, duplicate keys,
alias bombs), printing e.g.::

    invalid configuration: my.yaml: YAML syntax error: line 3, column 1: ...

and exiting 1.  It runs from two places:

1. ``scripts/reproduce.sh`` runs ``python -m distrepro_wf.pipeline.precheck "$@"`` first;
2. a plain ``snakemake`` next to the Snakefile reads the workflow profile
   ``profiles/default/config.yaml`` while it parses its command line, before it builds
   its settings: that profile is a yte template (``__use_yte__``, Snakemake's documented
   templating of profiles) whose ``__definitions__`` call :func:`snakemake_profile_hook`
   on Snakemake's own ``sys.argv``.  Jobs (``--mode subprocess`` / ``remote``) do not read
   the workflow profile.  ``--workflow-profile none`` skips the check (Snakemake's reader
   then reports the error its own way).

Without such arguments (the default grid) it does nothing: the Snakefile reads
config/config.yaml strictly itself.
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


def snakemake_profile_hook(argv: list[str] | None = None) -> None:
    """Check the ``--configfile`` arguments of the running ``snakemake`` (``sys.argv``), from
    the workflow profile; on an error print it and exit 1 before Snakemake reads the files."""
    if main(argv) != 0:
        raise SystemExit(1)


if __name__ == "__main__":
    sys.exit(main())
