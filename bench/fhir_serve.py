"""Served FHIR query latency: `ehrbench fhir serve`'s app (a real uvicorn server on a free port) over a build's view
or a folder of ndjson, asked N searches in the forms FHIR-AgentBench's client sends — `<Type>?patient=<id>`,
`<Type>?id=<id>`, `Observation?patient=<id>&code=<code>` — for seeded random patients, types and resources: their
first page, or with --max-pages > 1 the pages after it by `next` links as its client reads them (a patient's
Observations run to hundreds of pages). Prints the index build time, p50/p99/max per HTTP request, then a JSON line.

    uv run python bench/fhir_serve.py [--data-dir data] [--build latest] [--view mimic_iv_on_fhir] [--ndjson DIR]
                                      [--searches 1000] [--max-pages 1] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.fhir_fakes.serving: the same real-server helper the tests use

from ehrbench.fhir.server import create_app  # noqa: E402
from ehrbench.layout import BuildLayout, DataLayout  # noqa: E402
from tests.fhir_fakes import serving  # noqa: E402

TYPES = ("Encounter", "Condition", "Procedure", "Observation", "MedicationRequest", "MedicationAdministration",
         "Specimen")


def searches(database: Path, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    with duckdb.connect(str(database), read_only=True) as con:
        patients = [p for (p,) in con.execute("select distinct patient_id from resources where patient_id is not null "
                                              "order by 1").fetchall()]
        ids = con.execute("select resource_type, id from resources using sample reservoir(2000 rows) repeatable "
                          f"({seed}) order by all").fetchall()
        codes = [c for (c,) in con.execute(
            "select distinct json_extract_string(resource, '$.code.coding[0].code') as c from resources "
            "where resource_type = 'Observation' and c is not null order by 1 limit 500").fetchall()]
    queries = []
    for i in range(n):
        patient = rng.choice(patients)
        match i % 4:
            case 0 | 1:
                queries.append(f"{rng.choice(TYPES)}?patient={patient}")
            case 2:
                kind, resource_id = rng.choice(ids)
                queries.append(f"{kind}?id={resource_id}")
            case _:
                queries.append(f"Observation?patient={patient}&code={rng.choice(codes)}")
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "data")
    parser.add_argument("--build", default="latest")
    parser.add_argument("--view", default="mimic_iv_on_fhir")
    parser.add_argument("--ndjson", type=Path)
    parser.add_argument("--searches", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-pages", type=int, default=1, help="pages read per search")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        if options.ndjson:
            from ehrbench.fhir.ndjson_store import load_ndjson

            database = Path(scratch) / "resources.duckdb"
            started = time.perf_counter()
            load_ndjson(options.ndjson, database)
            print(f"loaded {options.ndjson} in {time.perf_counter() - started:.1f}s")
        else:
            folder = DataLayout(root=options.data_dir.resolve()).build_folder(options.build)
            database = BuildLayout(folder).fhir_view_resources(options.view)
        started = time.perf_counter()
        app = create_app(database)
        indexed = time.perf_counter() - started
        resources = sum(app.state.index.types.values())
        print(f"indexed {resources:,} resources in {indexed:.1f}s")
        latencies, pages, returned = [], 0, 0
        with serving(app) as base, httpx.Client(base_url=base, timeout=120) as http:
            for query in searches(database, options.searches, options.seed):
                url = f"/{query}"
                for _ in range(options.max_pages):  # following next, as the client's search_with_pagination does
                    started = time.perf_counter()
                    response = http.get(url, headers={"Prefer": "handling=lenient"})
                    latencies.append(time.perf_counter() - started)
                    response.raise_for_status()
                    bundle = response.json()
                    pages += 1
                    returned += len(bundle.get("entry", []))
                    url = next((link["url"] for link in bundle["link"] if link["relation"] == "next"), None)
                    if url is None:
                        break
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    result = {"resources": resources, "index_s": round(indexed, 2), "searches": options.searches, "requests": pages,
              "resources_returned": returned, "p50_ms": round(cuts[49] * 1000, 1),
              "p99_ms": round(cuts[98] * 1000, 1), "max_ms": round(max(latencies) * 1000, 1)}
    print(f"{options.searches} searches = {pages} requests, {returned:,} resources: p50 {result['p50_ms']} ms, "
          f"p99 {result['p99_ms']} ms, max {result['max_ms']} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
