"""The claims: the published statements (:mod:`.published`), judging each against the runs
(:mod:`.evaluate`, :mod:`.stats`, :mod:`.survival`, :mod:`.mechanisms`), and what a simulated
verdict rests on (:mod:`.closedform`, :mod:`.sensitivity`, :mod:`.sweep`).
"""
