"""Task sets: published benchmarks' task files imported into the data directory (`tasksets/<name>/`) and evaluated
like a generated suite (`ehrbench tasks import|list|score`, `ehrbench evaluate --taskset`).

- `formats`: the importer interface (`TaskFormat`, `BuildInfo`); `registry`: the formats by name;
- `ehrsql2024`, `ehrsql2022` (format `ehrsql`), `ehrchatqa`, `fhir_agentbench` (format `fhir-agentbench`): one
  module per published format;
- `model`: `ImportedTask`, `Target`, the task set's manifest with its reproduction report, task ids;
- `reading`: JSON with one-line errors; `execution`: gold SQL on a build's SQLite file;
- `importer`: check, then execute, compare and write; `store`: the folder on disk, written atomically;
- `predictions`: another harness's prediction file scored with the protocol's scorer.

This package imports nothing of ehrbench.evaluation: the evaluation loads task sets through it."""
