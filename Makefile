# orderagg — build, test and image targets. `make help` lists them.
#
# No container image can be pulled on this project's machines: the service
# image is FROM scratch around a host-built static binary, the Redis and
# Prometheus images are assembled from Debian's redis-server and prometheus
# packages (build/redis/build.sh, build/prometheus/build.sh).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO            ?= go
ORDERAGG_IMAGE ?= orderagg:local
# ORDERAGG_REDIS_IMAGE (the integration tests' name) is accepted too; REDIS_IMAGE wins.
REDIS_IMAGE   ?= $(if $(ORDERAGG_REDIS_IMAGE),$(ORDERAGG_REDIS_IMAGE),orderagg-redis:local)
# prom/prometheus works too where a registry is reachable (compose.yaml and
# the integration tests read the same variable).
ORDERAGG_PROMETHEUS_IMAGE ?= orderagg-prometheus:local
OUT           := build/out
BIN           := $(OUT)/orderagg
CA_BUNDLE     ?= /etc/ssl/certs/ca-certificates.crt
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GO_LDFLAGS    := -s -w -X main.version=$(VERSION)
COMPOSE       ?= docker-compose
# Debian packages the build and tests need; `make deps` installs the missing ones
# (prometheus: promtool for `make rules`, and the Prometheus image).
APT_PACKAGES  ?= redis-server redis-tools curl ca-certificates chromium fonts-liberation prometheus
# Every Go module in the repository (a directory with a go.mod, hidden ones
# and build outputs aside): make lint checks each of them.
GO_MODULES    := $(sort $(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path '*/.*' -not -path './build/out/*')))
# Pinned: a new staticcheck release may bring new checks. CI fetches it from
# the Go module proxy; go run caches the binary.
STATICCHECK   ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Per test binary; well under CI's 20 minutes so a hung test still fails the
# run in time. The integration binary is the longest: its reviews check
# patches a copy of the tree, then builds and tests most of it (90 s on an
# idle machine, over 3 min beside the race-enabled packages), so the whole
# binary takes 4–5 min in CI; at 5m one run in four on 2026-12-02 timed out.
# TestPrometheusAlertsAndDashboard adds about 50 s to it (a real Prometheus
# watching alerts go pending and fire), hence 7m.
TEST_TIMEOUT  ?= 7m
# make test runs go test -json (kept in $(OUT)/test.json) through this: it
# prints what plain go test would, lists the skips, and fails a CI run in
# which a test skipped for a missing prerequisite (build/skipcheck).
SKIPCHECK     := $(OUT)/skipcheck
# compose-smoke uses its own project name and free host ports (SMOKE_PORT /
# SMOKE_SIM_PORT fix them) so it cannot clash with anything already running.
SMOKE_PROJECT ?= orderagg-smoke

# The integration tests read these; Ryuk (the reaper) cannot be pulled here,
# every test removes its own containers and networks instead.
export ORDERAGG_IMAGE ORDERAGG_PROMETHEUS_IMAGE
export ORDERAGG_REDIS_IMAGE := $(REDIS_IMAGE)
export TESTCONTAINERS_RYUK_DISABLED ?= true
# Published container ports are reached on loopback (the engine runs in this
# network namespace); without this testcontainers may guess a gateway address.
export TESTCONTAINERS_HOST_OVERRIDE ?= 127.0.0.1
export REDIS_IMAGE SMOKE_PROJECT SMOKE_PORT SMOKE_SIM_PORT COMPOSE

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## static binary in build/out/orderagg (CGO off, tzdata embedded)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(GO_LDFLAGS)" -tags timetzdata -o $(BIN) ./cmd/orderagg
	@echo "built $(BIN) ($(VERSION))"

.PHONY: build-loadtest
build-loadtest: ## the load tool, build/out/orderagg-loadtest (a separate binary; the service never links it)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(OUT)/orderagg-loadtest ./cmd/orderagg-loadtest
	@echo "built $(OUT)/orderagg-loadtest"

.PHONY: run
run: ## run the service locally (embedded simulators and cache)
	$(GO) run ./cmd/orderagg $(ARGS)

.PHONY: deps
deps: ## install the missing Debian packages (APT_PACKAGES)
	build/apt-deps.sh $(APT_PACKAGES)

.PHONY: test
test: deps images rules ## apt packages if missing, images, the rules' tests, then every test (unit, integration, browser, real Redis, manifests) with -race
	$(GO) build -o $(SKIPCHECK) ./build/skipcheck
	build/with-redis.sh $(GO) test -json -race -count=1 -timeout $(TEST_TIMEOUT) ./... | tee $(OUT)/test.json | $(SKIPCHECK)
	cd deploy/kubernetes && $(GO) test -json -race -count=1 -timeout $(TEST_TIMEOUT) ./... | tee $(CURDIR)/$(OUT)/test-deploy.json | $(CURDIR)/$(SKIPCHECK)

.PHONY: rules
rules: deps build ## promtool: check and unit-test deploy/prometheus's rules, lint a fresh process's /metrics
	ORDERAGG_BIN=$(BIN) build/prometheus/check.sh

.PHONY: test-unit
test-unit: ## unit tests only (no Docker needed)
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/integration')

.PHONY: test-integration
test-integration: images ## integration tests only (Docker containers)
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -v ./integration/...

.PHONY: test-deploy
test-deploy: ## validate the Kubernetes manifests (their own Go module)
	cd deploy/kubernetes && $(GO) test -race -count=1 ./...

.PHONY: screenshot
screenshot: ## regenerate docs/img/dashboard.png from the dashboard's browser test (needs chromium; about a minute)
	ORDERAGG_SCREENSHOT=$(CURDIR)/docs/img/dashboard.png $(GO) test -count=1 -timeout $(TEST_TIMEOUT) \
		-run '^TestBrowserBreakItOpensTheBreaker$$' ./internal/dashboard/
	@echo "wrote docs/img/dashboard.png"

.PHONY: lint
lint: ## gofmt, then in every Go module: go mod tidy -diff, go vet and staticcheck
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then echo "gofmt needed on:"; echo "$$files"; exit 1; fi
	@for m in $(GO_MODULES); do \
		echo "== $$m: go mod tidy -diff, go vet, staticcheck"; \
		(cd $$m && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...) || exit 1; \
	done

.PHONY: images
images: image redis-image toxiproxy-image prometheus-image ## the four container images (service, Redis, Toxiproxy, Prometheus)

.PHONY: image
image: build ## the service image (ORDERAGG_IMAGE, default orderagg:local)
	cp $(CA_BUNDLE) $(OUT)/ca-certificates.crt
	docker build -q -t $(ORDERAGG_IMAGE) . >/dev/null
	@echo "built image $(ORDERAGG_IMAGE)"

.PHONY: redis-image
redis-image: deps ## the Redis image from Debian's package (REDIS_IMAGE, default orderagg-redis:local)
	build/redis/build.sh $(REDIS_IMAGE)

.PHONY: prometheus-image
prometheus-image: deps ## the Prometheus image from Debian's package, with deploy/prometheus's rules (ORDERAGG_PROMETHEUS_IMAGE, default orderagg-prometheus:local)
	build/prometheus/build.sh $(ORDERAGG_PROMETHEUS_IMAGE)

.PHONY: toxiproxy-image
toxiproxy-image: ## the Toxiproxy image from its Go module (ORDERAGG_TOXIPROXY_IMAGE, default orderagg-toxiproxy:local)
	GO=$(GO) build/toxiproxy/build.sh

.PHONY: compose-smoke
compose-smoke: deps ## compose up, one order through the stack, compose down
	build/compose-smoke.sh

.PHONY: clean
clean: ## remove build outputs and the local images
	rm -rf $(OUT)
	-docker image rm -f $(ORDERAGG_IMAGE) $(REDIS_IMAGE) $(ORDERAGG_PROMETHEUS_IMAGE) >/dev/null 2>&1

