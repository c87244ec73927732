"""``plan``: every method ranked on a described cluster (issue 33), by the project's simulator.

:mod:`.config` checks a config's ``plan:`` section and expands it into points (one short
simulated run each); :mod:`.table` reads the runs into the ranking and the crossover map;
:mod:`.page` renders ``reports/plan/<name>.html``.  Rules: ``workflows/rules/plan.smk``;
user documentation: ``docs/plan.md``.
"""
