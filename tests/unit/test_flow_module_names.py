"""Prefect puts a flow's folder on sys.path when it loads a deployment's entrypoint, so a flow module named like an
installed top-level package (flows/fhir.py vs fhir.resources) hides that package in the worker's flow run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

FLOWS = Path(__file__).resolve().parents[2] / "flows"


def test_no_flow_module_shadows_an_installed_package():
    shadowing = [path.name for path in FLOWS.glob("*.py")
                 if path.stem != "__init__" and importlib.util.find_spec(path.stem) is not None
                 and Path(importlib.util.find_spec(path.stem).origin or "").parent != FLOWS]
    assert not shadowing, f"rename these flow modules, they hide installed packages: {shadowing}"
