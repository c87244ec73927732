"""The pipeline: config validation and expansion into runs (:mod:`.config`), launching them
(:mod:`.launch`, :mod:`.runs`, :mod:`.session`), collecting their records into tables
(:mod:`.collect`) against the metric catalogue (:mod:`.catalogue`), and the data rules' helpers.
"""
