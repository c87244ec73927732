"""The report: figures (:mod:`.plots`), the evidence tables (:mod:`.evidence`), the pages
(:mod:`.pages`, :mod:`.build`).
"""
