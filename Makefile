# turnstile: `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
JARS_DIR := .turnstile/jars
SEEDS ?= 2000
SEED_BASE ?= 0
# Two workers (the CI machine's cores), each test file kept on one worker with its fixtures.
PYTEST_ARGS ?= -n 2 --dist loadfile

.PHONY: help setup system-deps jars lint test demo screenshots simulate bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(INSTALLED): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "turnstile needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

system-deps: ## Java 17 and jarjar (local Spark with Iceberg), Chromium (the console's browser tests): Debian packages
	@bash .ci/system-deps.sh

setup: $(INSTALLED) system-deps ## Create .venv, install pinned requirements, build the local Spark/Iceberg jars
	@$(BIN)/python -m turnstile.jobs.local_spark $(JARS_DIR) >/dev/null

lint: setup ## ruff and mypy (strict on the library)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint terraform-check ## Lint, type-check, check terraform/ offline and run every test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

simulate: $(INSTALLED) ## Seeded simulation of the protocol: make simulate SEEDS=N SEED_BASE=B
	$(BIN)/python -m turnstile_dev.simulation --seeds $(SEEDS) --seed-base $(SEED_BASE)

demo: setup ## Run the whole system on the embedded local stack and show the result; UI=1 then serves the console
	$(BIN)/python -m turnstile_dev.demo $(if $(UI),--ui)

screenshots: setup ## Regenerate docs/ui-*.png: the console's pages in Chromium over a local stack with real batches
	SCREENSHOTS=docs $(BIN)/python -m pytest -p no:xdist tests/e2e/test_console_browser.py -q

clean: ## Remove the virtualenv and local state
	rm -rf $(VENV) .turnstile .pytest_cache .mypy_cache .ruff_cache

# -- deployment (terraform/, docs/DEPLOY.md) ----------------------------------------------------------
CHECKOV_VENV := .venv-checkov
CHECKOV_REQUIREMENTS := tests/terraform/requirements-checkov.txt

.PHONY: package package-local package-aws terraform-check

package: setup ## Build build/function.zip and build/job/ (main.py, turnstile.zip, deps.zip, jars) for terraform/
	$(BIN)/python -m turnstile.deploy.packaging build

package-local: setup ## Build build/local/job/ for this machine (local pyspark's Scala 2.12, this Python): the Dataproc emulator runs it
	$(BIN)/python -m turnstile.deploy.packaging build/local --scala 2.12 \
		--python-version $$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')

package-aws: $(INSTALLED) ## Build build/aws/ (lambda.zip, job/main.py, job/turnstile.zip) for docs/DEPLOY-AWS.md
	$(BIN)/python -m turnstile.deploy.packaging build --cloud aws

# checkov pins versions that clash with the project's, so it gets a virtualenv of its own.
$(CHECKOV_VENV)/.installed: $(CHECKOV_REQUIREMENTS)
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --disable-pip-version-check -r $(CHECKOV_REQUIREMENTS)
	@touch $@

terraform-check: $(INSTALLED) $(CHECKOV_VENV)/.installed ## Offline Terraform checks: terraform fmt -check (embedded Terraform) and checkov
	$(BIN)/python tests/terraform/tfcheck.py terraform
	$(CHECKOV_VENV)/bin/checkov -d terraform --framework terraform --skip-download --compact --quiet

BENCH_ARGS ?=
bench: setup ## Benchmark coalescing against one job per batch (warm and cold), Structured Streaming, a bare loop: bench/results.md
	$(BIN)/python -m turnstile_dev.bench $(BENCH_ARGS)
