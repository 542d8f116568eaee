# Two commands on a fresh machine: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

SPARK_STAMP := $(VENV)/.spark-stamp
ANONYMETER_VENV := .venv-anonymeter
ANONYMETER_STAMP := $(ANONYMETER_VENV)/.installed-stamp
ANONYMETER_WORKER := dsh_assets/core/privacy/anonymeter_worker.py
LOWEST_VENV := .venv-lowest
LOWEST_STAMP := $(LOWEST_VENV)/.installed-stamp
FAST_TIER := -m "not spark and not postgres and not browser and not e2e"
# pytest's exit 5 (no test collected) is reported, not hidden as a crash
PYTEST_STATUS = status=$$?; if [ $$status -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$status

.PHONY: install lowest spark java browser postgres anonymeter demo test test-lowest check ui bench bench-graph bench-spark clean

$(STAMP): pyproject.toml
	@echo "installing the Python packages into $(VENV) (dagster, duckdb, pyarrow, opendp...; about 2 minutes the first time)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,postgres]'
	touch $(STAMP)

install: $(STAMP)

$(LOWEST_STAMP): pyproject.toml constraints-lowest.txt
	@echo "installing the lowest Dagster releases pyproject.toml allows into $(LOWEST_VENV) (about 2 minutes the first time)"
	$(PYTHON) -m venv $(LOWEST_VENV)
	$(LOWEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOWEST_VENV)/bin/python -m pip install --quiet -e '.[test,postgres]' -c constraints-lowest.txt
	touch $(LOWEST_STAMP)

lowest: $(LOWEST_STAMP)  ## an environment with the lowest Dagster releases pyproject.toml allows (constraints-lowest.txt)

$(SPARK_STAMP): $(STAMP) pyproject.toml
	@echo "installing pyspark with Spark Connect's client into $(VENV) (the spark engine; about 1 to 3 minutes the first time)"
	$(BIN)/python -m pip install --quiet -e '.[test,postgres,spark]'
	touch $(SPARK_STAMP)

spark: $(SPARK_STAMP)  ## the spark engine's Python packages (pyspark[connect]); Java from `make java`

java:  ## Debian's Java 17 runtime for Spark, only where `java` is missing (needs root or sudo)
	@command -v java >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing Debian's openjdk-17-jre-headless for the Spark tests (about 1 to 2 minutes)"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }

$(ANONYMETER_STAMP): anonymeter-requirements.txt $(ANONYMETER_WORKER)
	@echo "installing anonymeter into $(ANONYMETER_VENV), an environment of its own (it pins numpy < 1.27 and pyarrow < 22; about 1 minute the first time)"
	$(PYTHON) -m venv $(ANONYMETER_VENV)
	$(ANONYMETER_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ANONYMETER_VENV)/bin/python -m pip install --quiet -r anonymeter-requirements.txt
	$(ANONYMETER_VENV)/bin/python -I $(ANONYMETER_WORKER) --check
	touch $(ANONYMETER_STAMP)

anonymeter: $(ANONYMETER_STAMP)  ## anonymeter's own environment (the privacy evidence's second opinion runs there)

demo: install anonymeter  ## synthesise the default source, release every configuration, print a summary
	$(BIN)/dsh run

browser:  ## Debian's Chromium, for the test that renders the HTML report headless (needs root or sudo)
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing Debian's chromium for the browser tests (about 1 to 2 minutes)"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

postgres:  ## Debian's PostgreSQL server, for the tests that keep Dagster's storage in PostgreSQL (needs root or sudo)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing Debian's postgresql server for the storage tests (about 1 minute)"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; }

test: install spark java browser postgres anonymeter lowest  ## the whole suite on the newest Dagster in pyproject.toml's range, then the fast tier on the lowest
	@$(BIN)/python -m pytest -q -n auto --dist loadfile --no-loadscope-reorder; $(PYTEST_STATUS)
	@$(MAKE) --no-print-directory test-lowest

test-lowest: lowest anonymeter  ## the fast tier on the lowest Dagster releases pyproject.toml allows
	@echo "the fast tier on $$($(LOWEST_VENV)/bin/python -c 'import dagster; print("dagster", dagster.__version__)')"
	@$(LOWEST_VENV)/bin/python -m pytest -q -n auto $(FAST_TIER); $(PYTEST_STATUS)

check: install anonymeter  ## the fast tier: the core and the graph on an ephemeral instance (no spark, postgres, browser, e2e), one worker per core
	@$(BIN)/python -m pytest -q -n auto $(FAST_TIER); $(PYTEST_STATUS)

ui: install  ## the Dagster UI on http://127.0.0.1:3000
	$(BIN)/dsh ui

bench: install  ## release benchmark: ours vs pandas reference vs DuckDB floor, 1.1M and 11M rows
	$(BIN)/python benchmarks/bench_release.py

bench-graph: install  ## the whole graph (dsh run, one configuration) per step against the DuckDB floor, 1.1M rows
	$(BIN)/python benchmarks/bench_graph.py $(BENCH_ARGS)

bench-spark: spark java  ## ingest, release and exact figures on Spark local[2] against the embedded engine, per step (BENCH_ARGS=--large: 11M rows too)
	$(BIN)/python benchmarks/bench_spark.py $(BENCH_ARGS)

clean:
	rm -rf .dsh_home
