# service-email-handler — see README.md. `make up` and `make test` are the two commands.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SAM_CLI_VERSION := 1.170.0
EMULATOR ?= auto
VENV := .venv
PY := $(VENV)/bin/python
HOST_PYTHON := $(shell scripts/find-python.sh 2>/dev/null)
COMPOSE := $(shell scripts/compose.sh --which 2>/dev/null)

.PHONY: help venv wheelhouse images up down logs lint test test-unit test-integration test-docker bench clean

help: ## list targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

venv: $(VENV)/.stamp ## create .venv with the project and its dev tools (Python >= 3.12)
$(VENV)/.stamp: pyproject.toml
	@test -n "$(HOST_PYTHON)" || { echo "no Python >= 3.12 on this machine: 'make test' runs the suites in a container instead (scripts/test-in-container.sh)"; exit 1; }
	@echo "[venv] $(HOST_PYTHON) ($$($(HOST_PYTHON) --version))"
	@test -x $(PY) || $(HOST_PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[dev,bench]'
	@touch $@

wheelhouse: ## download image wheels and the RIE binary on the host
	@scripts/wheelhouse.sh

images: ## build OS base (debootstrap if needed), shared base, 6 function images, moto image, LocalStack image (if it cannot be pulled)
	@scripts/images.sh
	@scripts/localstack-image.sh >/dev/null || echo "[images] no LocalStack image: make up falls back to moto (EMULATOR=localstack fails)"

up: ## start the local stack (compose; EMULATOR=auto|localstack|moto, auto = LocalStack when it can be had; IAM=on|off, moto enforces IAM by default); also makes .venv for the CLI
	@if [ -n "$(HOST_PYTHON)" ]; then $(MAKE) --no-print-directory venv; \
	 else echo "[up] no Python >= 3.12 on this machine: use the CLI inside the stack, e.g. docker exec $$(docker ps -qf label=com.docker.compose.service=wiring) email-handler outbox"; fi
	@scripts/compose.sh up

down: ## stop the local stack
	@scripts/compose.sh down

logs: ## follow the local stack's logs
	@scripts/compose.sh logs

lint: venv ## ruff (lint and format check) and mypy, configured in pyproject.toml; make test runs it first
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: ## the one test command: lint, unit, integration (moto + host RIE), docker (images, compose); prints a timing summary
	@if [ -z "$(HOST_PYTHON)" ]; then exec scripts/test-in-container.sh; fi
	@$(MAKE) --no-print-directory venv
	@scripts/test.sh

# One pytest-xdist worker per core (TEST_WORKERS=1: a single process); one test file per worker keeps
# each file's module-scoped fixtures (RIE processes, the corpus run) in one place.
TEST_WORKERS ?= 2
XDIST := $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

test-unit: venv ## the unit suite alone (under a minute: the inner loop)
	$(PY) -m pytest tests/unit $(XDIST) $(PYTEST_ARGS)
test-integration: venv ## the integration suite alone (moto + host RIE, no Docker)
	$(PY) -m pytest tests/integration $(XDIST) $(PYTEST_ARGS)
test-docker: venv images ## the docker suite alone (builds the images first)
	$(PY) -m pytest tests/docker $(if $(XDIST),-n 3 --dist loadscope) $(PYTEST_ARGS)

bench: venv images ## benchmarks: writes bench/results.json, prints a table, renders the figures of docs/development.md
	$(PY) -m bench

clean: down ## remove build outputs (keeps the cached OS image)
	rm -rf .build $(VENV)
