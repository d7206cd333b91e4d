# ehrbench — the Make targets are the interface (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

UV ?= $(shell command -v uv 2>/dev/null || echo "$(HOME)/.local/bin/uv")
DATA_DIR ?= $(CURDIR)/data
PREFECT_PORT ?= 4200
PREFECT_HOST ?= 127.0.0.1
API_URL := http://$(PREFECT_HOST):$(PREFECT_PORT)/api
RUN_DIR := $(DATA_DIR)/run
# The Prefect server's database: a PostgreSQL cluster of the project's own (SQLite locks under a nightly's load).
PG_DIR ?= $(DATA_DIR)/postgres
PG := $(UV) run python -m ehrbench.stack.postgres
# The static server of the dashboard and Data Docs that Prefect artifacts link to (the UI opens no file:// links).
FILES_PORT ?= $(shell echo $$(($(PREFECT_PORT) + 1)))
FILES_URL := http://$(PREFECT_HOST):$(FILES_PORT)
REPORT_DIR ?= $(or $(EHRBENCH_REPORT_DIR),$(CURDIR)/reports/site)
WORK_POOL ?= local
MIMIC_IV_DIR ?= $(EHRBENCH_MIMIC_IV_DIR)
EICU_DIR ?= $(EHRBENCH_EICU_DIR)
# MIMIC-IV-Note (optional, credentialed): the noteqa suite then asks over its discharge summaries (needs
# NOTE_QUESTION_MODEL=… or EHRBENCH_NOTE_QUESTION_MODEL); without it, over synthetic notes.
MIMIC_IV_NOTE_DIR ?= $(EHRBENCH_MIMIC_IV_NOTE_DIR)
# Published EHRSQL-2024 mimic_iv/ folder (optional): its valid questions get FHIR resource-id ground truth.
EHRSQL2024_DIR ?= $(EHRBENCH_EHRSQL2024_DIR)
# The CDN files of the Great Expectations Data Docs, pinned in reports/gx_assets/ and installed with npm: every
# build copies them into its Data Docs, which then render offline.
NPM ?= npm
GX_ASSETS := reports/gx_assets
# The browser of the dashboard's browser test (Debian's package; Playwright drives it, downloads none).
CHROMIUM ?= /usr/bin/chromium

export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
# Prefect's client retries a busy API's 429/502/503 (+504) 8 times with backoff (~8 min; its default: 5, ~1 min).
export PREFECT_CLIENT_MAX_RETRIES ?= 8
export PREFECT_CLIENT_RETRY_EXTRA_CODES ?= 504
export DBT_SEND_ANONYMOUS_USAGE_STATS := false
# Every Prefect server started from here (make server, the tests' and bench scripts' temporary ones) records task runs
# in batches: why and the values in src/ehrbench/stack/prefect_server.py (a test keeps the two the same).
export PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE ?= 200
export PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_READ_BATCH_SIZE ?= 200
export PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL ?= 1
export PREFECT_HOME := $(DATA_DIR)/prefect
export PREFECT_PROFILES_PATH := $(PREFECT_HOME)/profiles.toml
export EHRBENCH_DATA_DIR := $(DATA_DIR)
export EHRBENCH_MIMIC_IV_DIR := $(MIMIC_IV_DIR)
export EHRBENCH_EICU_DIR := $(EICU_DIR)
export EHRBENCH_MIMIC_IV_NOTE_DIR := $(MIMIC_IV_NOTE_DIR)
export EHRBENCH_EHRSQL2024_DIR := $(EHRSQL2024_DIR)
# prefect.yaml's pull step goes to {{ $$EHRBENCH_REPO_DIR }}: resolved by `prefect deploy`, else by the
# worker's flow-run process at run time, so both get it.
export EHRBENCH_REPO_DIR := $(CURDIR)

# Shell functions for `server` and `stop`. Each background process is started with setsid, so the
# PID in $(RUN_DIR)/<name>.pid is also its process group (uv + Prefect's python + children).
# alive NAME: that process runs and is one of ours, a Prefect or ehrbench command (not a recycled PID).
# stop NAME: SIGTERM its process group, and the groups of its descendants (the worker starts each flow
# run in a session of its own, which survives the worker), twice (a Prefect worker only exits on the
# second), then SIGKILL.
PROCESS_FUNCTIONS = \
alive() { local p; p=$$(cat $(RUN_DIR)/$$1.pid 2>/dev/null) && kill -0 $$p 2>/dev/null \
  && tr '\0' ' ' < /proc/$$p/cmdline 2>/dev/null | grep -qE 'prefect|ehrbench'; }; \
descendants() { local c; for c in $$(pgrep -P $$1); do echo $$c; descendants $$c; done; }; \
stop() { local f=$(RUN_DIR)/$$1.pid p g groups sig i n=0; \
  [ -f $$f ] || { echo "$$1: not running"; return 0; }; p=$$(cat $$f); \
  if kill -0 $$p 2>/dev/null && ! alive $$1; then echo "$$1: pid $$p is not ours any more; not touching it"; \
  elif kill -0 -- -$$p 2>/dev/null; then \
    groups=$$( { echo $$p; for i in $$(pgrep -g $$p); do descendants $$i; done \
      | xargs -r ps -o pgid= -p; } | tr -d ' ' | sort -u); \
    for sig in TERM TERM KILL; do n=$$((n+1)); for g in $$groups; do kill -$$sig -- -$$g 2>/dev/null; done; \
      for i in $$(seq 1 30); do \
        for g in $$groups; do kill -0 -- -$$g 2>/dev/null && break; done || break 2; sleep 0.5; done; done; \
    echo "stopped $$1 (pid $$p; process groups $$(echo $$groups); signals sent: $$n, last SIG$$sig)"; \
  else echo "$$1: not running"; fi; rm -f $$f; }

.PHONY: help install gx-assets browser postgres sandbox demo build builds report docs test test-unit lint server deploy stop bench bench-profiles bench-scaleup bench-scaleup-profiles bench-fhir bench-meds bench-questions bench-dq bench-evaluate bench-report clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(UV):
	python3 -m pip install --quiet --user uv

install: $(UV) ## install the locked environment with uv
	$(UV) sync --frozen --compile-bytecode

demo: install gx-assets build ## install, then build a benchmark from the MIMIC-IV and eICU demos

gx-assets: $(GX_ASSETS)/node_modules/.package-lock.json ## install the Data Docs' CSS/JS with npm (offline Data Docs; skipped without npm)

$(GX_ASSETS)/node_modules/.package-lock.json: $(GX_ASSETS)/package.json $(GX_ASSETS)/package-lock.json
	@command -v $(NPM) >/dev/null 2>&1 || { echo "note: no npm: the Data Docs will load their CSS/JS from CDNs" \
	  "(install Node.js and npm, then make gx-assets)"; exit 0; }; \
	cd $(GX_ASSETS) && $(NPM) ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null

build: ## build a benchmark (MIMIC_IV_DIR=… EICU_DIR=… local copies, else download; EHRSQL2024_DIR=… to ground its questions in FHIR; MIMIC_IV_NOTE_DIR=… real notes for noteqa)
	$(UV) run ehrbench build $(if $(SEED),--seed $(SEED))

builds: ## list published builds
	$(UV) run ehrbench builds

report: install ## render an evaluation run's dashboard into reports/site/ (RUN_ID=…, default: the newest run)
	$(UV) run ehrbench report $(if $(RUN_ID),--run-id $(RUN_ID))

# `docs`: dbt's documentation site as one HTML file with the manifest and catalog inlined (opens from file://, no
# network). dbt compiles every model, so it gets every var: a seed-0 build's (ehrbench.profiles.profile_vars(0),
# renamed_random's seed-0 names included). The catalog is read from an empty temporary DuckDB (names and descriptions
# come from the YAML); DOCS_WAREHOUSE=data/warehouse.duckdb adds a built warehouse's column types, but only while no
# build runs (dbt opens the file for writing). DOCS_DIR ignores itself in git (its own .gitignore).
DOCS_DIR ?= $(CURDIR)/reports/dbt-docs
docs: install ## the dbt docs site as one offline file, reports/dbt-docs/static_index.html (DOCS_WAREHOUSE=… for column types)
	@work=$$(mktemp -d) && trap 'rm -rf "$$work"' EXIT && \
	vars=$$($(UV) run python -c 'import json; from ehrbench.profiles import profile_vars; print(json.dumps(profile_vars(0)))') && \
	EHRBENCH_WAREHOUSE=$(if $(DOCS_WAREHOUSE),$(abspath $(DOCS_WAREHOUSE)),$$work/empty.duckdb) \
	  $(UV) run dbt docs generate --static --quiet --project-dir dbt_project --profiles-dir dbt_project \
	    --target-path $$work/target --log-path $$work/logs --vars "$$vars" && \
	mkdir -p $(DOCS_DIR) && echo '*' > $(DOCS_DIR)/.gitignore && \
	cp $$work/target/static_index.html $(DOCS_DIR)/static_index.html && \
	echo "dbt docs: $(DOCS_DIR)/static_index.html ($$(du -h $(DOCS_DIR)/static_index.html | cut -f1); open it from file://)"

browser: ## install Debian's Chromium for the dashboard's browser test, if it is missing (root or sudo)
	@command -v $(CHROMIUM) >/dev/null 2>&1 || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	@$(CHROMIUM) --version 2>/dev/null

sandbox: ## install Debian's bubblewrap, which isolates LLM agents' SQL and Python, if it is missing (root or sudo)
	@command -v bwrap >/dev/null 2>&1 || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $$SUDO apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; }
	@$(UV) run python -c "from ehrbench.agents.sandbox import unavailable_reason as u; r = u(); \
	  print('sandbox: ' + (r or 'bubblewrap isolates agent code'))"

postgres: ## install Debian's PostgreSQL for the Prefect server of `make server` and its test, if it is missing (root or sudo)
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null 2>&1 || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  $$SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }

test: install gx-assets browser postgres sandbox ## the whole test suite (unit + integration)
	$(UV) run pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25

# The fast loop (< 1 min on 2 cores): it collects only tests/unit and tests/security, so no worker imports what
# the integration tests need (Great Expectations, Playwright) just to deselect them.
test-unit: install ## unit and security tests without the slow ones (make test runs everything)
	$(UV) run pytest -n 2 tests/unit tests/security -m "not integration and not slow"

lint: ## ruff
	$(UV) run ruff check src flows tests bench

# `server`: PostgreSQL (data/postgres), the Prefect server on it with its UI on PREFECT_PORT (the UI's API address
# follows the port; the logs stream lets `prefect deployment run … --watch` show each run's progress lines), the
# `local` work pool, a worker (EHRBENCH_FILES_URL: the flows link artifacts over HTTP), and the static file server.
server: install postgres ## start PostgreSQL, a Prefect server on it (UI on PREFECT_PORT), a `local` process work pool, a worker and the dashboards' file server (PIDs in data/run/)
	@mkdir -p $(RUN_DIR) $(PREFECT_HOME)
	@$(PROCESS_FUNCTIONS); \
	if alive server; then echo "Prefect server already running (pid $$(cat $(RUN_DIR)/server.pid)) at $(API_URL)"; \
	elif (exec 3<>/dev/tcp/$(PREFECT_HOST)/$(PREFECT_PORT)) 2>/dev/null; then \
	  echo "error: $(PREFECT_HOST):$(PREFECT_PORT) is already in use by a process this checkout did not start" \
	       "(see: ss -ltnp 'sport = :$(PREFECT_PORT)'). Stop it, or use another port:" \
	       "make server PREFECT_PORT=4300, then pass the same PREFECT_PORT to make deploy and make stop." >&2; exit 1; \
	else \
	  database=$$($(PG) start $(PG_DIR)) || exit 1; \
	  PREFECT_SERVER_DATABASE_CONNECTION_URL="$$database" PREFECT_SERVER_API_HOST=$(PREFECT_HOST) \
	  PREFECT_SERVER_API_PORT=$(PREFECT_PORT) PREFECT_UI_API_URL=$(API_URL) PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED=true \
	  PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED=true \
	  PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE=prefect.server.concurrency.lease_storage.filesystem \
	  setsid nohup $(UV) run prefect server start --host $(PREFECT_HOST) --port $(PREFECT_PORT) \
	    > $(RUN_DIR)/server.log 2>&1 < /dev/null & echo $$! > $(RUN_DIR)/server.pid; \
	  echo "starting Prefect server (pid $$(cat $(RUN_DIR)/server.pid)) on PostgreSQL; log: $(RUN_DIR)/server.log"; \
	fi; \
	for i in $$(seq 1 120); do \
	  curl -fs $(API_URL)/health >/dev/null && break; \
	  alive server || { echo "error: the Prefect server exited; end of $(RUN_DIR)/server.log:" >&2; \
	                    tail -n 20 $(RUN_DIR)/server.log >&2; rm -f $(RUN_DIR)/server.pid; exit 1; }; \
	  sleep 1; done; \
	curl -fs $(API_URL)/health >/dev/null || { echo "error: no answer from $(API_URL)/health after 120 s;" \
	  "see $(RUN_DIR)/server.log" >&2; exit 1; }
	@# The profile under PREFECT_HOME (= data/prefect, also named in .env) now points at this server, so
	@# plain `uv run prefect …` in the repository root talks to it; `make stop` unsets it again.
	@$(UV) run prefect config set PREFECT_API_URL=$(API_URL) >/dev/null
	@$(UV) run prefect work-pool inspect $(WORK_POOL) >/dev/null 2>&1 || \
	  $(UV) run prefect work-pool create $(WORK_POOL) --type process >/dev/null
	@$(PROCESS_FUNCTIONS); \
	if alive worker; then echo "Prefect worker already running (pid $$(cat $(RUN_DIR)/worker.pid))"; else \
	  PREFECT_API_URL=$(API_URL) EHRBENCH_FILES_URL=$(FILES_URL) EHRBENCH_REPORT_DIR=$(REPORT_DIR) \
	  setsid nohup $(UV) run prefect worker start --pool $(WORK_POOL) \
	    --name ehrbench-$(WORK_POOL) > $(RUN_DIR)/worker.log 2>&1 < /dev/null & echo $$! > $(RUN_DIR)/worker.pid; \
	  for i in $$(seq 1 60); do grep -q "started" $(RUN_DIR)/worker.log 2>/dev/null && break; \
	    alive worker || { echo "error: the worker exited; end of $(RUN_DIR)/worker.log:" >&2; \
	                      tail -n 20 $(RUN_DIR)/worker.log >&2; rm -f $(RUN_DIR)/worker.pid; exit 1; }; \
	    sleep 1; done; \
	  echo "started Prefect worker (pid $$(cat $(RUN_DIR)/worker.pid)) on pool '$(WORK_POOL)'; log: $(RUN_DIR)/worker.log"; \
	fi
	@$(PROCESS_FUNCTIONS); \
	if alive files; then echo "static file server already running (pid $$(cat $(RUN_DIR)/files.pid)) at $(FILES_URL)"; \
	elif (exec 3<>/dev/tcp/$(PREFECT_HOST)/$(FILES_PORT)) 2>/dev/null; then \
	  echo "error: $(PREFECT_HOST):$(FILES_PORT) is in use; choose another: make server FILES_PORT=…" >&2; exit 1; \
	else \
	  setsid nohup $(UV) run python -m ehrbench.stack.static_files --data-dir $(DATA_DIR) --report-dir $(REPORT_DIR) \
	    --host $(PREFECT_HOST) --port $(FILES_PORT) > $(RUN_DIR)/files.log 2>&1 < /dev/null & echo $$! > $(RUN_DIR)/files.pid; \
	  for i in $$(seq 1 30); do curl -fso /dev/null $(FILES_URL)/report/ -w '' 2>/dev/null; \
	    [ $$? -ne 7 ] && break; sleep 0.5; done; \
	  echo "started the static file server (pid $$(cat $(RUN_DIR)/files.pid)) for the artifacts' links: $(FILES_URL)"; \
	fi
	@echo "Prefect UI: http://$(PREFECT_HOST):$(PREFECT_PORT)   dashboards: $(FILES_URL)/report/"
	@echo "next: make deploy$(if $(filter-out 4200,$(PREFECT_PORT)), PREFECT_PORT=$(PREFECT_PORT)), then" \
	      "uv run prefect deployment run build-benchmark/demo --watch"

deploy: ## register prefect.yaml's deployments (build-benchmark/demo, evaluate-agents/nightly) with the server of `make server`
	@curl -fs $(API_URL)/health >/dev/null || { echo "error: no Prefect server at $(API_URL); run 'make server' first" >&2; exit 1; }
	PREFECT_API_URL=$(API_URL) EHRBENCH_REPO_DIR=$(CURDIR) \
	  EHRBENCH_MIMIC_IV_DIR=$(abspath $(MIMIC_IV_DIR)) EHRBENCH_EICU_DIR=$(abspath $(EICU_DIR)) \
	  EHRBENCH_EHRSQL2024_DIR=$(abspath $(EHRSQL2024_DIR)) \
	  EHRBENCH_MIMIC_IV_NOTE_DIR=$(if $(MIMIC_IV_NOTE_DIR),$(abspath $(MIMIC_IV_NOTE_DIR))) \
	  $(UV) run prefect --no-prompt deploy --all

stop: ## stop the worker, then the server (by PID), then PostgreSQL, and point the profile back at ephemeral mode
	@$(PROCESS_FUNCTIONS); stop worker; stop server; stop files
	@[ ! -d $(PG_DIR) ] || $(PG) stop $(PG_DIR)
	@$(UV) run prefect config unset PREFECT_API_URL -y >/dev/null 2>&1 || true

bench: install ## time and measure a cold demo build per stage (median and range of RUNS=3 builds; COLD=1: empty caches)
	$(UV) run python bench/build_demo.py $(if $(RUNS),--runs $(RUNS)) $(if $(COLD),--cold-caches)

bench-goals: install ## every goal of issue 23 measured in one go (RUNS=3; ONLY=demo,scaleup,evaluate,fhir,profiles): ~1.5 h
	$(UV) run python bench/goals.py $(if $(RUNS),--runs $(RUNS)) $(if $(ONLY),--only $(ONLY))

bench-machine: install ## how fast this machine is now (Python, new memory): figures of different hours compare when these do
	$(UV) run python bench/machine_speed.py

bench-profiles: install ## time the dbt profiles and export on the demo against the EHRSQL-2024 reference
	$(UV) run python bench/profiles.py

bench-scaleup: install ## the whole build on the MIMIC-IV demo replicated x1, x10, x100: each stage's time, CPU and memory (FACTORS=…, RUNS=…)
	$(UV) run python bench/scaleup_build.py $(if $(FACTORS),--factors $(FACTORS)) $(if $(RUNS),--runs $(RUNS))

bench-scaleup-profiles: install ## staging + profiles only on the replicated demo (FACTORS=…): the EHRSQL-2024 comparison
	$(UV) run python bench/scaleup.py $(if $(FACTORS),--factors $(FACTORS))

bench-fhir: install ## FHIR resources (both views) generated/validated per second (demo, x10); served search latency
	$(UV) run python bench/fhir.py $(if $(FACTORS),--factors $(FACTORS))
	$(UV) run python bench/fhir_serve.py --view mimic_iv_on_fhir

bench-questions: install ## questions generated and validated per second on the latest build; the stage's share
	$(UV) run python bench/questions.py $(if $(BUILD),--build $(BUILD))

bench-evaluate: install ## evaluation harness: trials per second through the flow (oracle; LLM agent on a scripted server)
	$(UV) run python bench/evaluate.py

bench-report: install ## report dashboards: aggregation and rendering time and site size for a large synthetic run and its nightly series
	$(UV) run python bench/report.py

bench-meds: install ## MEDS events made (dbt) and written and schema-checked per second (demo, x10; FACTORS=…)
	$(UV) run python bench/meds.py $(if $(FACTORS),--factors $(FACTORS))

bench-dq: install ## audit tasks: extract, injection and writing time, rule-auditor scores on the demo and its x10 scale-up
	$(UV) run python bench/dq.py

clean: ## remove the data directory's derived state (keeps data/raw downloads)
	rm -rf $(DATA_DIR)/warehouse.duckdb $(DATA_DIR)/warehouse.duckdb.wal $(DATA_DIR)/benchmarks $(DATA_DIR)/dbt
