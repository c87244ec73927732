"""Configuration: typed dataclass configs with declared bounds (:mod:`.dataclass_config`),
the workload (:mod:`.workload`) and the resolution of a run config (:mod:`.runconfig`).
"""
