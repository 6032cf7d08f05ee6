# atmost: `make help` lists every target.
.DEFAULT_GOAL := help
SHELL := /bin/bash

GO          ?= go
BIN         ?= bin
# VERSION is the nearest release tag (vMAJOR.MINOR.PATCH, see CHANGELOG.md), followed by the
# commits since it and -dirty where they apply (v0.1.0-3-gabc1234); without a tag, the commit.
# The build links it into every binary, and `atmost version` prints it.
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS     := -X github.com/atmost/atmost/internal/version.Version=$(VERSION)
GOLANGCI_LINT_VERSION := v2.15.0
# make lint installs golangci-lint once per version into TOOLS (a cache outside the repository).
TOOLS       ?= $(HOME)/.cache/atmost-tools
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
SQLC        := github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1
FUZZTIME    ?= 3m
BENCHTIME   ?= 20000x
POOL_INTENTS ?= 10000
ATMOST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/atmost?sslmode=disable
ATMOST_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
ATMOST_DEMO_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/atmost_demo?sslmode=disable
export ATMOST_DATABASE_URL ATMOST_TEST_DATABASE_URL ATMOST_DEMO_DATABASE_URL

.PHONY: help build postgres test test-short hooks lint fmt generate migrate fuzz bench bench-pool bench-peer bench-steady mutate clean-test-databases demo dev chaos chaos-cluster chaos-conn

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-21s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build every command into bin/ (the first build downloads the modules and compiles everything: 5 to 15 minutes on a 2-core machine)
	@[ -x $(BIN)/atmost ] || echo "make build: the first build downloads the modules and compiles every package into bin/: allow 5 to 15 minutes on a 2-core machine, with no output meanwhile; later builds take seconds"
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

postgres: ## find PostgreSQL at ATMOST_TEST_DATABASE_URL or start its local cluster, else stop naming the one command that fixes it (scripts/postgres; CI=true as root also installs it)
	@scripts/postgres ATMOST_TEST_DATABASE_URL

test: postgres npm-packages ## run every test with the race detector (needs PostgreSQL: make postgres runs first; the TypeScript client's tests need its npm packages: make npm-packages runs first), and bench/peer's own tests (no database; they keep that module building)
	$(GO) test -race -count=1 ./...
	cd bench/peer && $(GO) test -count=1 ./...

.PHONY: npm-packages
npm-packages: ## npm ci in clients/typescript and examples/ts-agent, each only when its node_modules is missing or its package-lock.json changed (scripts/npm-packages)
	@scripts/npm-packages

.PHONY: test-crdb
test-crdb: ## the ledger suite on CockroachDB: ATMOST_CRDB_URL, or a cockroach binary on PATH (skips without)
	$(GO) test -race -count=1 -timeout 30m -run '^TestCockroachDB$$' -v ./pkg/ledger/

.PHONY: test-bluesky
test-bluesky: ## the Bluesky lane on a real PDS on loopback: installs Node 22 and @atproto/dev-env (scripts/bluesky-pds/install: minutes the first time), then runs the conformance suite, every action, the lost answers, images and 500 intents with 5 % of the answers lost; fails, never skips, without them
	scripts/bluesky-pds/install
	ATMOST_BLUESKY_LANE=1 $(GO) test -race -count=1 -timeout 10m -v ./internal/testkit/blueskylane/

.PHONY: test-matrix
test-matrix: postgres ## the Matrix lane on a real Dendrite on loopback: builds Dendrite v0.13.8 from the Go module proxy into a cache (scripts/dendrite/install: minutes the first time), then runs the conformance suite and 500 intents with 5 % of the answers lost; fails, never skips, without it
	scripts/dendrite/install
	ATMOST_MATRIX_LANE=1 $(GO) test -race -count=1 -timeout 20m -v ./internal/testkit/matrixlane/

.PHONY: test-email
test-email: postgres ## the email lane on a real Postfix and Dovecot on loopback: installs and configures them from Debian's packages (scripts/email/install, as root), then runs the conformance suite and 500 intents with 5 % of the answers lost; fails, never skips, without them
	scripts/email/install
	ATMOST_EMAIL_LANE=1 $(GO) test -race -count=1 -timeout 20m -v ./internal/testkit/emaillane/

test-short: ## the fast lane, about a minute: go test -short, which skips the tests that take seconds each (a database of their own, a browser, every binary built); under CI=true nothing skips; never instead of make test
	$(GO) test -short ./...

hooks: ## install scripts/commit-msg as this clone's commit-msg hook (a subject of at most 72 characters, then a blank line); an existing hook of another kind is left alone
	@hook=$$(git rev-parse --git-path hooks)/commit-msg; \
	if [ -e "$$hook" ] && ! grep -q scripts/commit-msg "$$hook"; then echo "make hooks: $$hook exists and is not ours; call scripts/commit-msg \"\$$1\" from it"; exit 1; fi; \
	mkdir -p "$$(dirname "$$hook")"; \
	printf '%s\n' '#!/bin/sh' '# make hooks: the rule is scripts/commit-msg, of the worktree committed from (none there: no check)' \
		'rule="$$(git rev-parse --show-toplevel)/scripts/commit-msg"' '[ -x "$$rule" ] || exit 0' 'exec "$$rule" "$$@"' >"$$hook"; \
	chmod +x "$$hook"; echo "make hooks: $$hook runs scripts/commit-msg"

$(GOLANGCI_LINT):
	GOBIN=$(dir $@) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: $(GOLANGCI_LINT) ## golangci-lint (.golangci.yml) and go vet on both modules, gofmt, sqlc diff (the generated ledger code is current), and the subjects of the commits after scripts/commit-base
	$(GO) vet ./...
	$(GOLANGCI_LINT) run --allow-serial-runners ./...
	cd bench/peer && $(GO) vet ./... && $(GOLANGCI_LINT) run --allow-serial-runners --config ../../.golangci.yml ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	@$(GO) run $(SQLC) diff || { echo "make lint: pkg/ledger/internal/dbsqlc is not what pkg/ledger/queries and migrations generate: run make generate and commit it"; exit 1; }
	scripts/check-commits

fmt: ## format every Go file
	gofmt -w $$(git ls-files '*.go')

generate: ## regenerate the ledger's query code from pkg/ledger/queries with sqlc
	$(GO) run $(SQLC) generate

migrate: build ## create and migrate the ledger at ATMOST_DATABASE_URL
	$(BIN)/atmost migrate --create-database

bench: postgres ## benchmarks on the real database and JetStream: the ledger at both isolation levels, ingest of 100,000 intents, the relay, a sweeper pass over 100,000 intents, end to end through ingest, dispatcher and platformsim, reconciliation at 5 % and 20 % unknown outcomes and of a backlog of 10,000, the client publishing 100,000 intents and its Status latency, publishing over HTTP and NATS (rate, and latency to the outcome), the console's pages on a ledger of 1,000,000 intents
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./pkg/ledger/ -args -isolation=serializable
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./pkg/ledger/ -args -isolation=read-committed
	$(GO) test -run '^$$' -bench '^BenchmarkIngest$$' -benchtime 100000x ./internal/role/ingest/
	$(GO) test -run '^$$' -bench PublishRate -benchtime 20000x ./internal/role/ingest/
	$(GO) test -run '^$$' -bench PublishToOutcome -benchtime 1000x ./internal/role/ingest/
	$(GO) test -run '^$$' -bench . -benchtime 100000x ./internal/relay/
	$(GO) test -run '^$$' -bench SweepPass -benchtime 20x ./internal/role/sweep/
	$(GO) test -run '^$$' -bench EndToEnd -benchtime 10000x ./internal/role/dispatch/ -args -isolation=serializable
	$(GO) test -run '^$$' -bench EndToEnd -benchtime 10000x ./internal/role/dispatch/ -args -isolation=read-committed
	$(GO) test -run '^$$' -bench Reconcile -benchtime 10000x ./internal/role/reconcile/
	$(GO) test -run '^$$' -bench ConsolePages -benchtime 200x ./internal/console/
	$(GO) test -run '^$$' -bench PublishAll -benchtime 100000x ./pkg/client/
	$(GO) test -run '^$$' -bench Status -benchtime 10000x ./pkg/client/

# Each run twice (-count 2: all its cells, then all again), since the machine's rate varies.
POOL_BENCH = $(GO) test -run '^$$' -benchtime $(POOL_INTENTS)x -count 2 -timeout 60m ./internal/role/dispatch/

bench-pool: postgres ## the dispatcher pool: 1, 2 and 4 dispatcher processes on one ledger (BenchmarkEndToEnd, POOL_INTENTS intents, each cell twice) at 0 and 50 ms platform latency, read committed and serializable, at 50 ms with 256 intents in flight a process (batches of 64), and one account's rate bucket against 1,000 accounts (12-20 minutes here)
	$(POOL_BENCH) -bench EndToEnd -args -isolation=read-committed -dispatchers=1,2,4
	$(POOL_BENCH) -bench EndToEnd/platform-latency=50ms -args -isolation=read-committed -dispatchers=1,2,4 -concurrency=256 -batch=64
	$(POOL_BENCH) -bench EndToEnd -args -isolation=serializable -dispatchers=1,2,4
	$(POOL_BENCH) -bench EndToEnd/platform-latency=0s -args -isolation=read-committed -dispatchers=1,4 -rate=60000000 -accounts=1
	$(POOL_BENCH) -bench EndToEnd/platform-latency=0s -args -isolation=read-committed -dispatchers=1,4 -rate=60000000 -accounts=1000
	$(POOL_BENCH) -bench EndToEnd/platform-latency=0s -args -isolation=read-committed -dispatchers=1,4 -accounts=1000
	$(POOL_BENCH) -bench EndToEnd/platform-latency=0s -args -isolation=serializable -dispatchers=1,4 -rate=60000000 -accounts=1

bench-peer: postgres ## the same job through atmost and through a River at-least-once pipeline, one run, both rates and the ratio (bench/peer, its own module; PEER_FLAGS="-faults 0.05" adds dropped answers and counts duplicates, -intents N, -help)
	cd bench/peer && $(GO) run . $(PEER_FLAGS)

bench-steady: postgres ## atmost under an open-loop load: 200 and 1,000 intents/s and half of its measured maximum, for 60 s each at 0 and 50 ms platform latency, p50/p99/p99.9 of publish to authorized and to published (PEER_FLAGS="-rates 1500 -latencies 0")
	cd bench/peer && $(GO) run . -mode steady $(PEER_FLAGS)

fuzz: ## run each fuzz target for FUZZTIME (default 3m; FuzzIngest needs PostgreSQL)
	$(GO) test -run '^$$' -fuzz '^FuzzParseEnvelope$$' -fuzztime $(FUZZTIME) -parallel 1 ./pkg/identity/
	$(GO) test -run '^$$' -fuzz '^FuzzCanonicalJSON$$' -fuzztime $(FUZZTIME) -parallel 1 ./pkg/identity/
	$(GO) test -run '^$$' -fuzz '^FuzzIngest$$' -fuzztime $(FUZZTIME) -parallel 1 ./internal/role/ingest/
	$(GO) test -run '^$$' -fuzz '^FuzzLookupFindsWhatDecodingFinds$$' -fuzztime $(FUZZTIME) -parallel 1 ./pkg/platform/webhook/
	$(GO) test -run '^$$' -fuzz '^FuzzSafeNext$$' -fuzztime $(FUZZTIME) -parallel 1 ./internal/console/

mutate: postgres ## remove each guard in turn (scripts/mutations.txt; MUTATE_FLAGS="-only REGEX" for some) and prove a test goes red (needs PostgreSQL)
	scripts/mutate -sqlc $(SQLC) $(MUTATE_FLAGS)

clean-test-databases: ## drop every database the tests made on ATMOST_TEST_DATABASE_URL's server
	psql "$$ATMOST_TEST_DATABASE_URL" -Atc \
		"SELECT datname FROM pg_database WHERE datname ~ '^atmost_(test|tmpl|build)_'" | \
		while read -r db; do psql "$$ATMOST_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS \"$$db\" WITH (FORCE)"; done

chaos: postgres ## the crash-and-fault suite with 10,000 intents: real processes, random SIGKILLs, a NATS restart, a paused dispatcher; ends with duplicates: 0, lost: 0, undeclared: 0, events_missing: 0 (make test runs a short one)
	$(GO) test -count=1 -run '^TestChaos$$' -v -timeout 60m ./internal/tools/chaos/ -args -chaos.intents=$${CHAOS_INTENTS:-10000}

chaos-cluster: postgres ## the crash-and-fault suite on a three-node JetStream cluster (R3 streams, sync_interval: always) with 10,000 intents: two ingesters, four dispatchers, two sweepers, two reconcilers; stream leaders SIGKILLed, a server stopped past the election timeout; the same checks and line as chaos, plus the NATS kills and leader changes (make test runs a short one)
	$(GO) test -count=1 -run '^TestChaosCluster$$' -v -timeout 60m ./internal/tools/chaos/ -args -chaos.intents=$${CHAOS_INTENTS:-10000}

chaos-conn: postgres ## the crash-and-fault suite with every role behind fault proxies to PostgreSQL and NATS (COMMITs cut after and before they were forwarded, resets inside transactions, 5-40 s stalls, delays; publishes and deliveries cut), no role killed, with 10,000 intents at serializable then at read committed; the same checks, and none parked by the connections alone, the faults counted, the settle time (make test runs a short one)
	$(GO) test -count=1 -run '^TestChaosConnections$$' -v -timeout 60m ./internal/tools/chaos/ -args -chaos.intents=$${CHAOS_INTENTS:-10000} -chaos.isolation=serializable
	$(GO) test -count=1 -run '^TestChaosConnections$$' -v -timeout 60m ./internal/tools/chaos/ -args -chaos.intents=$${CHAOS_INTENTS:-10000} -chaos.isolation=read-committed

demo: ## the whole pipeline on the embedded default: every role, an embedded NATS, a fault-injecting platform, a producer, a kill switch mid-run, and the final count; the console follows it (on a terminal it stays up after the count until Ctrl-C) (needs PostgreSQL at ATMOST_DEMO_DATABASE_URL, checked first as make postgres does)
	@scripts/postgres ATMOST_DEMO_DATABASE_URL
	@$(MAKE) --no-print-directory build
	@stay=$$([ -t 0 ] && echo --stay); echo "$(BIN)/atmost demo $$stay"; $(BIN)/atmost demo $$stay

dev: ## build, then run every role, an embedded NATS, the platform simulator and the console in one process on ATMOST_DATABASE_URL until Ctrl-C; a ledger without accounts gets sim-1, and dev prints the next steps; a busy 4222 moves the embedded NATS to a free port (DEV_FLAGS adds flags)
	@scripts/postgres ATMOST_DATABASE_URL
	@$(MAKE) --no-print-directory build
	@flags='$(DEV_FLAGS)'; \
	if ! printf '%s' "$$flags" | grep -q -- '--nats' && (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then \
		echo "make dev: 127.0.0.1:4222 is in use (another NATS server); the embedded one takes a free port, and dev prints its ATMOST_NATS_URL"; \
		flags="$$flags --nats-port 0"; \
	fi; \
	echo "$(BIN)/atmost dev$$flags"; exec $(BIN)/atmost dev $$flags
