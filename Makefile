# ehrbench — the Make targets are the interface (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

UV ?= $(shell command -v uv 2>/dev/null || echo "$(HOME)/.local/bin/uv")
DATA_DIR ?= $(CURDIR)/data
PREFECT_PORT ?= 4200
PREFECT_HOST ?= 127.0.0.1
API_URL := http://$(PREFECT_HOST):$(PREFECT_PORT)/api
RUN_DIR := $(DATA_DIR)/run
MIMIC_IV_DIR ?= $(EHRBENCH_MIMIC_IV_DIR)
EICU_DIR ?= $(EHRBENCH_EICU_DIR)

export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DBT_SEND_ANONYMOUS_USAGE_STATS := false
export PREFECT_HOME := $(DATA_DIR)/prefect
export EHRBENCH_DATA_DIR := $(DATA_DIR)
export EHRBENCH_MIMIC_IV_DIR := $(MIMIC_IV_DIR)
export EHRBENCH_EICU_DIR := $(EICU_DIR)

.PHONY: help install demo build builds test test-unit lint server deploy stop bench clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(UV):
	python3 -m pip install --quiet --user uv

install: $(UV) ## install the locked environment with uv
	$(UV) sync --frozen --compile-bytecode

demo: install build ## install, then build a benchmark from the MIMIC-IV and eICU demos

build: ## build a benchmark (MIMIC_IV_DIR=… EICU_DIR=… to use local copies; else download)
	$(UV) run ehrbench build $(if $(SEED),--seed $(SEED))

builds: ## list published builds
	$(UV) run ehrbench builds

test: install ## the whole test suite (unit + integration)
	$(UV) run pytest

test-unit: install ## unit tests only
	$(UV) run pytest -m "not integration"

lint: ## ruff
	$(UV) run ruff check src flows tests bench

server: install ## start a local Prefect server, a `local` process work pool and a worker
	@mkdir -p $(RUN_DIR) $(PREFECT_HOME)
	@if [ -f $(RUN_DIR)/server.pid ] && kill -0 $$(cat $(RUN_DIR)/server.pid) 2>/dev/null; then \
	  echo "server already running (pid $$(cat $(RUN_DIR)/server.pid))"; else \
	  nohup $(UV) run prefect server start --host $(PREFECT_HOST) --port $(PREFECT_PORT) \
	    > $(RUN_DIR)/server.log 2>&1 & echo $$! > $(RUN_DIR)/server.pid; fi
	@for i in $$(seq 1 90); do curl -fs $(API_URL)/health >/dev/null && break; sleep 1; done; \
	  curl -fs $(API_URL)/health >/dev/null || { echo "server did not start; see $(RUN_DIR)/server.log"; exit 1; }
	$(UV) run prefect config set PREFECT_API_URL=$(API_URL) >/dev/null
	$(UV) run prefect work-pool inspect local >/dev/null 2>&1 || $(UV) run prefect work-pool create local --type process
	@if [ -f $(RUN_DIR)/worker.pid ] && kill -0 $$(cat $(RUN_DIR)/worker.pid) 2>/dev/null; then \
	  echo "worker already running (pid $$(cat $(RUN_DIR)/worker.pid))"; else \
	  nohup $(UV) run prefect worker start --pool local --name ehrbench-local \
	    > $(RUN_DIR)/worker.log 2>&1 & echo $$! > $(RUN_DIR)/worker.pid; fi
	@echo "Prefect UI: http://$(PREFECT_HOST):$(PREFECT_PORT)  (logs in $(RUN_DIR))"

deploy: ## register the deployments of prefect.yaml with the running server
	EHRBENCH_REPO_DIR=$(CURDIR) $(UV) run prefect --no-prompt deploy --all

stop: ## stop the worker, then the server
	@stop() { pid_file=$(RUN_DIR)/$$1.pid; [ -f $$pid_file ] || return 0; pid=$$(cat $$pid_file); \
	  for attempt in 1 2 3 4 5 6 7 8 9 10; do kill -0 $$pid 2>/dev/null || break; \
	    pkill -TERM -P $$pid 2>/dev/null; kill -TERM $$pid 2>/dev/null; sleep 1; done; \
	  kill -0 $$pid 2>/dev/null && kill -KILL $$pid; rm -f $$pid_file; echo "stopped $$1"; }; \
	  stop worker; stop server
	-@$(UV) run prefect config unset PREFECT_API_URL -y >/dev/null 2>&1

bench: install ## time and measure a cold demo build per stage
	$(UV) run python bench/build_demo.py

clean: ## remove the data directory's derived state (keeps data/raw downloads)
	rm -rf $(DATA_DIR)/warehouse.duckdb $(DATA_DIR)/benchmarks $(DATA_DIR)/dbt
