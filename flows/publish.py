"""[10/10] publish: write manifest.json into the build's staging folder, rename it into data/benchmarks/<build_id>/
and point data/benchmarks/latest at it (ehrbench.publish); artifact `build-published`."""

from __future__ import annotations

from prefect import flow, get_run_logger

from ehrbench.layout import DataLayout
from ehrbench.manifest import Manifest
from ehrbench.publish import publish
from flows.prefect_api import markdown_artifact


@flow(name="publish")
def publish_build(layout: DataLayout, manifest: Manifest) -> str:
    folder = publish(layout.benchmarks, manifest)
    get_run_logger().info("Published build %s at %s", manifest.build_id, folder)
    unverified = manifest.unverified_inputs
    markdown_artifact(
        key="build-published",
        markdown="\n".join([
            f"# Build `{manifest.build_id}` published",
            f"- folder: `{folder}` (`latest` points here)",
            f"- seed: {manifest.seed}",
            f"- inputs: {len(manifest.inputs)} files, {len(unverified)} unverified"
            + (f" ({', '.join(f'{f.dataset}.{f.table}' for f in unverified)})" if unverified else ""),
            f"- raw rows: {sum(manifest.raw_row_counts.values()):,} in {len(manifest.raw_row_counts)} tables",
            f"- built tables: {len(manifest.built_row_counts)}",
            "- stage timings: " + ", ".join(f"{k} {v.seconds:.1f}s" for k, v in manifest.stages.items()),
        ]),
        description=f"Build {manifest.build_id}")
    return str(folder)
