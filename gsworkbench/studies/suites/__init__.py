"""The benchmark suites: each module registers one suite with
:func:`~gsworkbench.bench.registry.register_suite`, and importing this package registers them all.

``gsworkbench bench NAME`` runs one; the listing of ``gsworkbench bench --help`` reads each module's first
docstring line without importing it. A suite module imports at its top what listing its cases needs, and
what a case runs (training, the viewer, the scene generators) in the case's setup, so that registering
them all stays cheap.
"""

from gsworkbench.studies.suites import adam, converge, field, overhead, reconstruct, render, train, transforms, viewer

__all__ = ["adam", "converge", "field", "overhead", "reconstruct", "render", "train", "transforms", "viewer"]
