"""Raw PhysioNet releases: their file layouts, checksums, download and load into the warehouse."""

from ehrbench.sources.releases import DATASETS, Release, TableSpec, release_for

__all__ = ["DATASETS", "Release", "TableSpec", "release_for"]
