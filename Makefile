# Cloison — build, test and run targets. `make help` lists them: each
# target's `## target: summary` line, the lines under it say more.
SHELL := /bin/bash
GO ?= go
PKGS ?= ./...
BENCHTIME ?= 200ms
FUZZTIME ?= 20s

.PHONY: all build verify test test-unit help bench fuzz clean run load llama-vocab chat-fixtures peer-bench peer-batch arch-check lora-check peer-quant llama-native peer-serve bench-overhead

## all: make verify, then make test (the default target).
all: verify test

## help: list the targets with their summary line.
help:
	@awk '/^## [a-z0-9][a-z0-9-]*: / { if (!prev) { t = $$2; sub(/:$$/, "", t); l = $$0; sub(/^## [^:]*: /, "", l); printf "  %-17s %s\n", t, l } } { prev = /^##/ }' $(MAKEFILE_LIST)

## build: go build ./... (every package compiles).
build:
	$(GO) build ./...

# Version stamping: VERSION from git describe, COMMIT beside it for builds
# where the toolchain records no vcs.revision (a git worktree,
# GOFLAGS=-buildvcs=false); cloisond/cloisonctl --version print both
# (internal/buildinfo).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/cloison/cloison/internal/buildinfo.Version=$(VERSION) -X github.com/cloison/cloison/internal/buildinfo.Commit=$(COMMIT)

## image: the OCI image (FROM scratch, non-root, no shell), built offline with buildah.
## The OCI image IMAGE (default cloison:$(VERSION)) built offline by
## scripts/image.sh with Debian's buildah, FROM scratch, from make binaries;
## runs it once with podman where the machine allows. buildah and podman come
## from Debian bookworm (apt; pinned to the bookworm versions below where apt
## still has them, else the candidate).
IMAGE ?= cloison:$(VERSION)
BUILDAH_VERSION ?= 1.28.2+ds1-3+deb12u1+b3
PODMAN_VERSION ?= 4.3.1+ds1-8+deb12u1+b3
.PHONY: image image-tools
image-tools:
	@command -v buildah >/dev/null && command -v podman >/dev/null || { \
	  apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah=$(BUILDAH_VERSION) podman=$(PODMAN_VERSION) >/dev/null 2>&1 || \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah podman >/dev/null; }
image: binaries image-tools
	scripts/image.sh '$(IMAGE)' '$(VERSION)'

## ha-test: HA PostgreSQL failover under traffic, no acknowledged event lost (minutes, root; not in make test).
## scripts/ha.sh runs a local etcd, a primary and a
## synchronous standby under Patroni and PgBouncer (transaction mode) on
## private ports in a temporary directory, as user postgres; internal/hatest (build
## tag hatest) SIGKILLs the primary under traffic, once with cloisond on the
## multi-host URL and once behind PgBouncer, and asserts no acknowledged
## event is lost. Tools from Debian bookworm at the versions it ships.
PATRONI_VERSION ?= 3.0.2-1
ETCD_VERSION ?= 3.4.23-4+b4
PGBOUNCER_VERSION ?= 1.18.0-1+deb12u1
.PHONY: ha-test ha-tools
ha-tools:
	@command -v patroni >/dev/null && command -v etcd >/dev/null && command -v pgbouncer >/dev/null || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq patroni=$(PATRONI_VERSION) etcd-server=$(ETCD_VERSION) pgbouncer=$(PGBOUNCER_VERSION) >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get install -y -qq patroni etcd-server pgbouncer >/dev/null; }; }
ha-test: ha-tools
	GO=$(GO) scripts/ha.sh direct
	GO=$(GO) scripts/ha.sh pgbouncer

## chart-check: helm lint and kubeconform -strict on deploy/helm/cloison, optional parts on and off.
## helm and
## kubeconform are installed at pinned versions through the Go module proxy
## into .cache/bin. kubeconform's schemas are made offline by
## scripts/k8s-schemas.py from the OpenAPI spec in the k8s.io/kubernetes
## module (K8S_SCHEMA_VERSION, through the proxy); the two CRD kinds, cert-manager's
## Certificate and the Prometheus operator's ServiceMonitor, have no schema
## there and are skipped by name (-skip), nothing else.
HELM_VERSION ?= v3.17.3
KUBECONFORM_VERSION ?= v0.7.0
K8S_SCHEMA_VERSION ?= v1.30.14
HELM := $(CURDIR)/.cache/bin/helm
KUBECONFORM := $(CURDIR)/.cache/bin/kubeconform
K8S_SCHEMAS := $(CURDIR)/.cache/k8s-schemas/$(K8S_SCHEMA_VERSION)
CHART := deploy/helm/cloison
CHART_TEST_VALUES := --set secrets.database.runtimePassword=p --set secrets.keys.clusterKey=00 --set secrets.keys.kek=00 --set secrets.keys.logKey=00 --set secrets.metrics.token=t
.PHONY: chart-check chart-tools
chart-tools:
	@[ -x $(HELM) ] && $(GO) version -m $(HELM) | grep -q 'mod.*$(HELM_VERSION)' || { echo "installing helm $(HELM_VERSION) into .cache/bin"; GOBIN=$(CURDIR)/.cache/bin $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); }
	@[ -x $(KUBECONFORM) ] && $(GO) version -m $(KUBECONFORM) | grep -q 'mod.*$(KUBECONFORM_VERSION)' || { echo "installing kubeconform $(KUBECONFORM_VERSION) into .cache/bin"; GOBIN=$(CURDIR)/.cache/bin $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION); }
	@[ -s $(K8S_SCHEMAS)/deployment-apps-v1.json ] || { dir=$$(GOFLAGS=-mod=mod $(GO) mod download -json k8s.io/kubernetes@$(K8S_SCHEMA_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
	  python3 scripts/k8s-schemas.py "$$dir/api/openapi-spec/swagger.json" $(K8S_SCHEMAS); }
chart-check: chart-tools
	$(HELM) lint --strict $(CHART) $(CHART_TEST_VALUES)
	$(HELM) lint --strict $(CHART) $(CHART_TEST_VALUES) --set tls.certManager.enabled=true --set serviceMonitor.enabled=true --set decode.gpu=1 --set prefill.gpu=1
	@set -eo pipefail; for opts in "" "--set prefill.enabled=false --set networkPolicy.enabled=false --set migration.enabled=false" \
	  "--set tls.certManager.enabled=true --set serviceMonitor.enabled=true --set decode.gpu=1 --set prefill.gpu=1 --set model.claimName=models --set model.file=m.gguf --set node.region=ca-qc --set node.tier=dedicated --set tracing.endpoint=otel-collector:4317 --set tracing.insecure=true"; do \
	  echo "== helm template $$opts | kubeconform -strict"; \
	  $(HELM) template c $(CHART) $(CHART_TEST_VALUES) $$opts | \
	    $(KUBECONFORM) -strict -summary -skip Certificate,ServiceMonitor -schema-location '$(K8S_SCHEMAS)/{{ .ResourceKind }}{{ .KindSuffix }}.json'; done

## binaries: static, version-stamped bin/cloisond and bin/cloisonctl (the inputs of make image).
## CGO_ENABLED=0, so they run FROM scratch.
.PHONY: binaries
binaries:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -ldflags '$(LDFLAGS)' -o bin/cloisond ./cmd/cloisond
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -ldflags '$(LDFLAGS)' -o bin/cloisonctl ./cmd/cloisonctl

## config-doc: regenerate cmd/cloisond/CONFIG.md and the API field table of docs/api.md.
## CONFIG.md comes from the flag definitions (TestConfigReference fails when
## stale), the field table from api/fields.go (TestREADMEFieldTable).
.PHONY: config-doc
config-doc:
	$(GO) run ./cmd/cloisond --config-reference > cmd/cloisond/CONFIG.md
	UPDATE_API_FIELDS=1 $(GO) test -count=1 -run '^TestREADMEFieldTable$$' ./api

## verify: gofmt, go vet and staticcheck (default and faults builds); go mod tidy changes nothing.
## staticcheck is installed at a pinned version from
## the Go module proxy into .cache/bin.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(CURDIR)/.cache/bin/staticcheck
verify: staticcheck-install
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags faults ./...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags faults ./...
	@cp go.mod /tmp/cloison-go.mod.bak; cp go.sum /tmp/cloison-go.sum.bak 2>/dev/null || true; \
	  $(GO) mod tidy; \
	  if ! git diff --quiet -- go.mod go.sum; then echo "go mod tidy changed go.mod/go.sum:"; git diff -- go.mod go.sum; exit 1; fi

## test: every test, as CI runs them: -race, sdk-test, console-test, ablation suites, arm64, the full 2026 suite (15-25 min in CI).
## Every test with the race detector, no cache, make sdk-test (node
## and npm, as llama-vocab), then the ablation suites with -tags faults and
## make arm64-check (qemu-aarch64). PostgreSQL first:
## scripts/pg.sh finds or starts one and prints its URL (fails if none).
test: llama-vocab test-tools arm64-tools console-tools
	@set -o pipefail; url=$$(scripts/pg.sh) || { echo "make test: no PostgreSQL (scripts/pg.sh failed)" >&2; exit 1; }; \
	  export DATABASE_URL="$$url"; \
	  $(GO) test -race -count=1 -timeout 30m $(PKGS) && \
	  echo "== make sdk-test: the openai npm client and the AI SDK against a real cloisond (about 30 s)" && \
	  DATABASE_URL="$$url" scripts/sdk-test.sh && \
	  echo "== make console-test: the web console in headless Chromium against a real cloisond (about a minute)" && \
	  scripts/console-test.sh && \
	  echo "== ablation suites: -tags faults (the test-only defence switches exist only in that build)" && \
	  $(GO) test -race -count=1 -tags faults -run '^($(FAULTS_SUITES))$$' $(FAULTS_PKGS) && \
	  echo "== property suites at full size, without the race detector (it slows the CPU kernels ~20x)" && \
	  $(GO) test -count=1 -tags faults -run '$(FULL_SUITES)' -v ./engine/ | grep -E '^(--- |ok|FAIL|PASS)' && \
	  echo "== allocation tests, without the race detector (its sync.Pool drops items at random)" && \
	  $(GO) test -count=1 -run 'Allocs' ./kernels/... ./engine/... && \
	  echo "== the CPU kernels on arm64 under qemu-aarch64 (make arm64-check, about 2 minutes)" && \
	  $(MAKE) --no-print-directory arm64-check && \
	  echo "== the 2026 incident suite at full size (1,048,576-token context, 681,280-token prefill pool)" && \
	  $(GO) test -count=1 -timeout 40m -tags faults -run '^TestIncident2026$$' -v ./node/platformtest/ | grep -E '^(    --- |--- |ok|FAIL|PASS)'

## test-unit: the Go tests, -short, no -race: no sdk-test, arm64, ablation or full-size suites (about 2.5 min on 2 cores).
## Run it often while working, make test before a merge. -short runs
## TestLeakOracle at its reduced size and skips the 66,000-event tile test;
## TestIncident2026 and the ablation suites need -tags faults and are not
## built; make sdk-test (npm) and make arm64-check (qemu) are left out.
## PostgreSQL as for make test; TestLlamaCppVectors skips unless make
## llama-vocab has run.
test-unit:
	@set -o pipefail; url=$$(scripts/pg.sh) || { echo "make test-unit: no PostgreSQL (scripts/pg.sh failed)" >&2; exit 1; }; \
	  DATABASE_URL="$$url" $(GO) test -short -count=1 -timeout 20m $(PKGS)

# Randomized suites that run reduced under -race and in full here.
FULL_SUITES ?= TestLeakOracle|TestIncidentLayers|TestCoTenantIndependence

# Tests that switch defences off (files with //go:build faults), and the
# packages that hold them. The default build has no such switch
# (TestDefaultBuildCannotSwitchADefenceOff).
FAULTS_SUITES ?= TestUnsafeSwitches|TestIncidentLayers|TestRemotePlaceholderFailsClosed|TestPlaceholderClaimRefused|TestConformance|TestUnsafeSkipOwnershipChecks|TestIsolationViolationFailsClosed|TestTransferFailureRecorded|TestProbeFindsThe2026Leak|TestProbeDefencesHoldAgainstTheBug|TestProbeSplitMisaligned|TestIncident2026|TestReplayVerdicts
FAULTS_PKGS ?= ./isolation/ ./engine/ ./engine/transfer/ ./kernels/cpu/ ./api/ ./node/probe/ ./node/platformtest/

## test-tools: install poppler-utils and promtool with apt when missing (the PDF and metrics checks need them).
## pdftotext and pdftoppm (Debian poppler-utils), which the
## register PDF tests read pages back with, and promtool (Debian prometheus),
## which api's metrics tests check the exposition and the alert rules with;
## installed with apt-get when missing (root on Debian), else those checks
## skip and say so (and fail under CI=true).
.PHONY: test-tools
test-tools:
	@command -v pdftotext >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y poppler-utils >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y poppler-utils >/dev/null 2>&1; }; }; } || \
	  echo "make test-tools: poppler-utils not installed; the PDF read-back checks will skip" >&2
	@command -v promtool >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1; }; }; } || \
	  echo "make test-tools: prometheus (promtool) not installed; the metrics and alert-rule checks will skip" >&2

## llama-vocab: llama.cpp's tokenizer vocabularies and vectors into .cache/llama-vocab (npm the first time).
## From the pinned npm package node-llama-cpp, for engine/tokenizer's
## TestLlamaCppVectors.
llama-vocab:
	@scripts/llama-vocab.sh >/dev/null

## chat-fixtures: regenerate engine/chat/testdata/hf from @huggingface/jinja (node, npm; not in make test).
chat-fixtures:
	@scripts/chat-fixtures.sh

## bench: every benchmark with a short benchtime (ends in minutes).
bench:
	@url=$$(scripts/pg.sh) || { echo "make bench: no PostgreSQL (scripts/pg.sh failed)" >&2; exit 1; }; \
	  export DATABASE_URL="$$url"; \
	  $(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

## bench-fair: tenant b's time to first token alone and under tenant a's flood (16 long streams):
## the scheduler's decision in tokens (machine-independent), then the engine's in ms and tokens
## at step budgets FAIR_BATCHES (512 128).
FAIR_BATCHES ?= 512 128
.PHONY: bench-fair
bench-fair:
	@$(GO) test -run '^$$' -bench BenchmarkFairShareSteps -benchtime 1x ./engine | grep Benchmark; \
	for b in $(FAIR_BATCHES); do echo "max-batch-tokens=$$b"; \
	  FAIR_BATCH=$$b $(GO) test -run '^$$' -bench 'BenchmarkFairShare$$' -benchtime 1x ./engine | grep Benchmark; done

## bench-ledger: ledger appends/s and Append p50/p99, four writer processes on one database.
## Beside raw pgx.Batch inserts in the same run, so a figure reads against
## what the database itself can take. BENCH_LEDGER_N events in total.
BENCH_LEDGER_N ?= 100000
.PHONY: bench-ledger
bench-ledger:
	@url=$$(scripts/pg.sh) || { echo "make bench-ledger: no PostgreSQL (scripts/pg.sh failed)" >&2; exit 1; }; \
	  export DATABASE_URL="$$url"; grep -m1 'model name' /proc/cpuinfo; \
	  $(GO) test -run '^$$' -bench BenchmarkLedgerFourWriters -benchtime $(BENCH_LEDGER_N)x -count 3 ./audit/postgres

## bench-ledger-ab: the ledger benchmarks of OLD (default main) and the working tree, alternately.
## In one run, so both see the same machine load (scripts/bench-ledger-ab.sh; BENCH,
## BENCH_LEDGER_N, ROUNDS as there).
OLD ?= main
.PHONY: bench-ledger-ab
bench-ledger-ab:
	scripts/bench-ledger-ab.sh $(OLD)

## peer-bench: prefill and decode speed, ours ÷ llama.cpp's llama-bench built natively (make llama-native), on synthesized models (idle machine).
## 1 and 2 threads, measured alternately (see scripts/peer-bench.sh for its
## knobs). PEER=node: against the pinned npm package node-llama-cpp instead,
## with the F32 logits check (needs node, npm).
## PEER_SHAPES=small,large adds d=1536 GQA models with a 32k vocabulary;
## PEER_TYPES takes bf16 and q6_k too.
peer-bench:
	scripts/peer-bench.sh

## llama-native: build llama.cpp's llama-bench, llama-batched-bench, llama-server and llama-embedding natively for this CPU (not part of make test).
## From the source the pinned node-llama-cpp ships (scripts/llama-src.sh),
## CPU only, Release, -DGGML_NATIVE=ON, into .cache/llama-native/<cpu-key>/
## (one build per CPU kind; cmake and g++ from apt-get when missing); prints
## the binaries' directory. Many minutes on a small machine; a no-op once built.
llama-native:
	scripts/llama-native.sh

## peer-serve: cloisond ÷ llama-server (native), cloisonctl bench serve at 1, 4, 16, 64 clients, alternating (idle machine).
## The same synthesized GGUF and threads on both sides; llama-server with
## continuous batching and as many slots as cloisond's --max-running. Prints
## the ratios (output throughput, TTFT p50/p99, TPOT p50) and writes
## .cache/peer-serve/peer-serve.json; knobs in scripts/peer-serve.sh.
peer-serve:
	scripts/peer-serve.sh

## bench-overhead: the platform's overhead, cloisond ÷ its engine alone in process, at 1, 4, 16, 64 clients and half load (idle machine).
## The same GGUF, engine flags and requests on both sides (cloisonctl bench
## serve --engine), alternating; cloisond with --server-timing for the
## breakdown per stage. Prints efficiency (output throughput ratio), TTFT
## p50/p99 ratios and the breakdown; writes .cache/bench-overhead/bench-overhead.json;
## knobs in scripts/bench-overhead.sh.
bench-overhead:
	scripts/bench-overhead.sh

## peer-batch: decode tok/s of 16 sequences together ÷ one, ours beside llama.cpp's.
## Against llama.cpp's own llama-batched-bench built natively (make llama-native), measured alternately
## (see scripts/peer-batch.sh); PEER=node: through node-llama-cpp (pinned, sequences: 16; needs node, npm).
peer-batch:
	scripts/peer-batch.sh

## arm64-check: the CPU kernels on arm64 under qemu-aarch64 (about 2 minutes; part of make test).
## Without arm64 hardware:
## CGO_ENABLED=0 GOARCH=arm64 go build ./..., then the test binaries of
## ./kernels/, ./kernels/cpu/ and ./kernels/kernelstest/ cross-compiled and
## run under qemu-aarch64 (Debian's qemu-user, pinned; installed with apt-get
## when missing): CLOISON_CPU=neon and generic on qemu's default CPU "max"
## (ASIMDDP: the SDOT Q8_0 kernel), and neon with QEMU_CPU=cortex-a53 (no
## dot product: the SMULL/SADALP kernel). kernels/cpu's TestConformance runs
## kernelstest on every path. Part of make test (about 2 minutes on 2 cores).
QEMU_USER_VERSION ?= 1:7.2+dfsg-7+deb12u18+b3
.PHONY: arm64-check arm64-tools
arm64-tools:
	@command -v qemu-aarch64 >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user=$(QEMU_USER_VERSION) >/dev/null; }
arm64-check: arm64-tools
	@set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	  echo "== arm64-check: CGO_ENABLED=0 GOARCH=arm64 go build ./..."; \
	  CGO_ENABLED=0 GOARCH=arm64 $(GO) build ./...; \
	  for p in kernels kernels/cpu kernels/kernelstest; do \
	    CGO_ENABLED=0 GOARCH=arm64 $(GO) test -c -o "$$d/$$(echo $$p | tr / _).test" ./$$p/; done; \
	  run() { cpu=$$1 path=$$2 p=$$3; shift 3; [ -x "$$d/$$(echo $$p | tr / _).test" ] || return 0; \
	    echo "== arm64-check: $$p under qemu-aarch64 -cpu $$cpu, CLOISON_CPU=$$path"; \
	    ( cd $$p && QEMU_CPU=$$cpu CLOISON_CPU=$$path qemu-aarch64 "$$d/$$(echo $$p | tr / _).test" -test.count=1 "$$@" ); }; \
	  for p in kernels kernels/cpu kernels/kernelstest; do run max neon $$p; done; \
	  run max generic kernels/cpu; \
	  run cortex-a53 neon kernels/cpu
## lora-check: record llama.cpp's logits with the synthetic LoRA adapters applied (TestLlamaCppLoRALogits' oracle).
lora-check:
	scripts/lora-check.sh
## arch-check: record llama.cpp's logits on the synthetic architecture files (TestLlamaCppLogits' oracle).
## node-llama-cpp from npm, pinned; engine/model/testdata/archcheck into
## engine/model/testdata/llamacpp_logits.json.
arch-check:
	scripts/arch-check.sh

## encoder-check: record llama.cpp's embeddings and rank scores on the synthetic BERT files (TestLlamaCppEncoders' oracle).
.PHONY: encoder-check
encoder-check:
	scripts/encoder-check.sh

## rerank-check: record llama-server's (make llama-native) /v1/rerank scores on a synthetic qwen3 reranker (TestLlamaServerRerank's oracle).
## LLAMA_SERVER=PATH: another llama-server binary.
.PHONY: rerank-check
rerank-check:
	$(GO) run ./api/testdata/rerankcheck $(if $(LLAMA_SERVER),-server $(LLAMA_SERVER)) api/testdata/llamaserver_rerank.json

## encoder-bench: BenchmarkEncoderEmbed once, batches of ENCODER_BENCH_INPUTS (default 64) inputs of 128 tokens
## (llama.cpp beside it: make peer-embed, docs/models.md).
ENCODER_BENCH_INPUTS ?= 64
.PHONY: encoder-bench
encoder-bench:
	$(GO) test -run '^$$' -bench BenchmarkEncoderEmbed -benchmem -benchtime 1x ./engine/model -args -encoder-bench-inputs $(ENCODER_BENCH_INPUTS)

## peer-embed: embeddings/s ours ÷ llama-embedding's (native), 64 inputs of 128 tokens, 1 and 2 threads, alternating (idle machine).
## Synthesized MiniLM-L6-shaped encoders (bert Q8_0 and F16, nomic-bert
## Q8_0), the same text file on both sides (cloisonctl bench embed --text;
## llama-embedding's prompt eval time), PEER_ROUNDS rounds, each side's best
## kept; writes .cache/peer-embed/peer-embed.json; knobs in scripts/peer-embed.sh.
.PHONY: peer-embed
peer-embed:
	scripts/peer-embed.sh
## sdk-test: the openai npm client, the AI SDK and LangChain against a real cloisond (node ≥ 20, npm).
## The API as its users call it — the official openai npm client
## and the AI SDK (pinned, npm) against a real cloisond on the context-bag
## model with Qwen 2.5's template: chat, streaming, tools, json_schema,
## logprobs, completions, models, the Responses API (store, retrieve,
## delete, another tenant's 404) and the AI SDK's default provider and
## .chat(), LangChain's ChatOpenAI (scripts/sdk-test.sh). Needs node ≥ 20
## and npm.
.PHONY: sdk-test
sdk-test:
	scripts/sdk-test.sh
## peer-quant: logits of every synthesizable weight type against llama.cpp's on the same file.
## node-llama-cpp, pinned; scripts/peer-quant.sh.
peer-quant:
	scripts/peer-quant.sh

## fuzz: each fuzz target for FUZZTIME (default 20s).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

.PHONY: staticcheck-install
staticcheck-install:
	@if ! [ -x $(STATICCHECK) ] || ! $(STATICCHECK) -version 2>/dev/null | grep -q '($(STATICCHECK_VERSION))'; then \
	  echo "installing staticcheck $(STATICCHECK_VERSION) into .cache/bin"; \
	  GOBIN=$(CURDIR)/.cache/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); fi

## clean: remove bin/ and .cache/go-build.
clean:
	rm -rf bin .cache/go-build

## generate: regenerate the committed protobuf/gRPC code of api/proto and engine/transfer/proto.
## api/proto holds the public APIs, engine/transfer/proto the node-to-node ones (prefill, transfer). It
## installs what it needs: protoc from Debian's protobuf-compiler (apt), the Go
## plugins at pinned versions from the Go module proxy (into .cache/bin).
PROTOC_VERSION ?= 3.21.12
PROTOC_GEN_GO_VERSION ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.2
PROTO_ROOTS ?= api/proto engine/transfer/proto
.PHONY: generate
generate:
	@command -v protoc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null; }
	@v=$$(protoc --version | awk '{print $$2}'); if [ "$$v" != "$(PROTOC_VERSION)" ]; then \
	  echo "make generate: protoc $$v, want $(PROTOC_VERSION) (the version is written into the generated files; set PROTOC_VERSION to override)" >&2; exit 1; fi
	GOBIN=$(CURDIR)/.cache/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(CURDIR)/.cache/bin $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	for root in $(PROTO_ROOTS); do \
	  PATH=$(CURDIR)/.cache/bin:$$PATH protoc -I $$root \
	    --go_out=$$root --go_opt=paths=source_relative \
	    --go-grpc_out=$$root --go-grpc_opt=paths=source_relative \
	    $$(find $$root -name '*.proto' | sort) || exit 1; \
	done

## console-test: the web console's journeys in headless Chromium against a real cloisond (node, npm, chromium).
## scripts/console-test.sh: puppeteer-core and axe-core from npm, pinned,
## into .cache/console-test/node; Debian's chromium (make console-tools);
## the privacy officer's, the administrator's and a tenant's journeys, XSS
## through tenant-controlled strings, framing, axe-core on every page;
## screenshots into .cache/console-test/shots. Fails, never skips, when a
## tool is missing.
.PHONY: console-test console-tools
CHROMIUM_VERSION ?= 156.0.8078.114-1~deb12u1
console-tools:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && { export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends chromium=$(CHROMIUM_VERSION) >/dev/null 2>&1 || \
	  { apt-get update -qq && { apt-get install -y -qq --no-install-recommends chromium=$(CHROMIUM_VERSION) >/dev/null 2>&1 || \
	    apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; }; }; } || \
	  { echo "make console-tools: chromium is not installed and could not be (root and apt-get needed); make console-test needs it" >&2; exit 1; }
console-test: console-tools
	scripts/console-test.sh

## run: the whole platform on embedded defaults, with a dev tenant and token; prints a curl command and the console's address.
## Local PostgreSQL (found or started by scripts/pg.sh), role setup and migrations through the admin URL,
## the built-in context-bag model, a dev tenant and a dev token; prints a
## ready-to-paste curl command. cloisond logs in as the runtime role with its
## own password (generated once into .cache/cloison/db-runtime.password, mode
## 0600); cloisonctl's token command uses the admin URL.
## RUN_ARGS: further cloisond flags (e.g. several --model files: docs/models.md).
RUN_ADDR ?= 127.0.0.1:8080
RUN_CONSOLE_ADDR ?= 127.0.0.1:8081
RUN_DB ?= cloison
# dburls DB: sets admin (the administrator's URL of database DB) and runtime
# (the same database, logged in as the default runtime role). The
# development targets (run, load, bench-serve, scripts/sdk-test.sh,
# console-test.sh and
# peer-serve.sh) share the default roles on purpose, one database each:
# they name the same --db-deployment (dev), which role setup would
# otherwise refuse as another deployment's roles.
define dburls
admin=$$(scripts/pg.sh); base=$${admin%%\?*}; base=$${base%/*}; opts=""; case "$$admin" in *\?*) opts="?$${admin#*\?}";; esac; \
	  hostpart=$${base#*://}; hostpart=$${hostpart#*@}; \
	  admin="$$base/$(1)$$opts"; runtime="postgres://cloison_runtime@$$hostpart/$(1)$$opts"
endef
# runpw DIR: the runtime role's password file, generated once.
define runpw
[ -s $(1)/db-runtime.password ] || (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > $(1)/db-runtime.password)
endef
run:
	@set -e; mkdir -p bin .cache/cloison; chmod 700 .cache/cloison; \
	  $(GO) build -o bin/cloisond ./cmd/cloisond; $(GO) build -o bin/cloisonctl ./cmd/cloisonctl; \
	  $(call dburls,$(RUN_DB)); $(call runpw,.cache/cloison); rm -f .cache/cloison/ready; \
	  bin/cloisond --addr $(RUN_ADDR) --database-url "$$runtime" --migrate-database-url "$$admin" --db-runtime-password-file .cache/cloison/db-runtime.password --db-deployment dev \
	    --create-database --dev --dev-tenant dev --state-dir .cache/cloison --ready-file .cache/cloison/ready \
	    --console-addr $(RUN_CONSOLE_ADDR) $(RUN_ARGS) & pid=$$!; \
	  trap 'kill $$pid 2>/dev/null || true; wait $$pid 2>/dev/null || true' INT TERM EXIT; \
	  for i in $$(seq 1 120); do [ -s .cache/cloison/ready ] && break; kill -0 $$pid 2>/dev/null || exit 1; sleep 0.5; done; \
	  tok=$$(bin/cloisonctl --database-url "$$admin" token issue --tenant dev --subject dev --scopes infer,compliance:read --ttl 24h --state-dir .cache/cloison); \
	  officer=$$(bin/cloisonctl --database-url "$$admin" token issue --tenant dev --subject dev-officer --scopes admin,compliance:read,compliance:write --ttl 8h --state-dir .cache/cloison); \
	  echo; echo "Cloison is serving on http://$(RUN_ADDR) (model cloison-context-bag, tenant dev). Try:"; echo; \
	  echo "  curl -s http://$(RUN_ADDR)/v1/chat/completions -H 'Authorization: Bearer $$tok' \\"; \
	  echo "    -H 'Content-Type: application/json' -d '{\"model\":\"cloison-context-bag\",\"messages\":[{\"role\":\"user\",\"content\":\"Bonjour\"}],\"max_tokens\":16}'"; \
	  echo; echo "The console (privacy officer and administrator) is on http://$(RUN_CONSOLE_ADDR)/ ; sign in with this token (8 h):"; \
	  echo; echo "  $$officer"; \
	  echo; echo "Ctrl-C stops it."; wait $$pid

## load: 64 streaming clients for LOAD_DURATION (60s) against a fresh cloisond: req/s, TTFT, errors, RSS.
## The built-in model; prints requests/s, tokens/s, TTFT p50/p99,
## errors and the server's peak RSS. Loopback only.
LOAD_DURATION ?= 60s
LOAD_CLIENTS ?= 64
load:
	@set -e; mkdir -p bin .cache/cloison-load; chmod 700 .cache/cloison-load; \
	  $(GO) build -o bin/cloisond ./cmd/cloisond; $(GO) build -o bin/cloisonctl ./cmd/cloisonctl; \
	  $(call dburls,cloison_load); $(call runpw,.cache/cloison-load); rm -f .cache/cloison-load/ready; \
	  bin/cloisond --addr 127.0.0.1:0 --database-url "$$runtime" --migrate-database-url "$$admin" --db-runtime-password-file .cache/cloison-load/db-runtime.password --db-deployment dev \
	    --create-database --dev --dev-tenant dev --state-dir .cache/cloison-load --ready-file .cache/cloison-load/ready \
	    --max-running 64 --max-batch-tokens 1024 2>.cache/cloison-load/cloisond.log & pid=$$!; \
	  trap 'kill $$pid 2>/dev/null || true; wait $$pid 2>/dev/null || true' INT TERM EXIT; \
	  for i in $$(seq 1 120); do [ -s .cache/cloison-load/ready ] && break; kill -0 $$pid 2>/dev/null || exit 1; sleep 0.5; done; \
	  tok=$$(bin/cloisonctl --database-url "$$admin" token issue --tenant dev --subject load --ttl 2h --state-dir .cache/cloison-load); \
	  bin/cloisonctl load --url http://$$(cat .cache/cloison-load/ready) --token "$$tok" --clients $(LOAD_CLIENTS) --duration $(LOAD_DURATION) --pid $$pid

## bench-serve: cloisonctl bench serve, a concurrency sweep as vLLM's bench serve measures it, with an SVG plot.
## Against SERVE_URL (with SERVE_TOKEN, SERVE_MODEL) when set, e.g. llama-server, else
## a fresh cloisond like make load's (--max-running 64; --server-timing: the breakdown per stage) serving SERVE_MODEL_FILE (a GGUF, e.g.
## from cloisonctl model synth; empty: the built-in context-bag model) as SERVE_MODEL. Sweeps
## SERVE_SWEEP (1, 4, 16, 64 clients; or --sweep-rates R1,R2,…) with SERVE_PROMPTS requests
## each (one database per SERVE_MODEL: its dev tenant may use it); SERVE_ARGS adds flags
## (lengths, rates, tenants, goodput). Writes .cache/bench-serve/serve.{json,svg}.
SERVE_URL ?=
SERVE_TOKEN ?=
SERVE_MODEL ?= cloison-context-bag
SERVE_MODEL_FILE ?=
SERVE_SWEEP ?= --sweep-concurrency 1,4,16,64
SERVE_PROMPTS ?= 64
SERVE_ARGS ?= --input-len 128 --output-len 64 --goodput ttft:1000,tpot:100
.PHONY: bench-serve
bench-serve:
	@set -e; mkdir -p bin .cache/bench-serve; chmod 700 .cache/bench-serve; \
	  $(GO) build -o bin/cloisonctl ./cmd/cloisonctl; grep -m1 'model name' /proc/cpuinfo || true; \
	  bench() { bin/cloisonctl bench serve --base-url "$$1" --api-key "$$2" --model $(SERVE_MODEL) --num-prompts $(SERVE_PROMPTS) \
	    $(SERVE_SWEEP) $(SERVE_ARGS) --json .cache/bench-serve/serve.json --plot .cache/bench-serve/serve.svg; }; \
	  if [ -n "$(SERVE_URL)" ]; then bench "$(SERVE_URL)" "$(SERVE_TOKEN)"; exit; fi; \
	  $(GO) build -o bin/cloisond ./cmd/cloisond; \
	  $(call dburls,cloison_bench_serve_$(subst .,_,$(subst -,_,$(SERVE_MODEL)))); $(call runpw,.cache/bench-serve); rm -f .cache/bench-serve/ready; \
	  bin/cloisond --addr 127.0.0.1:0 --database-url "$$runtime" --migrate-database-url "$$admin" --db-runtime-password-file .cache/bench-serve/db-runtime.password --db-deployment dev \
	    --create-database --dev --dev-tenant dev --state-dir .cache/bench-serve --ready-file .cache/bench-serve/ready \
	    --max-running 64 --max-batch-tokens 1024 --server-timing $(if $(SERVE_MODEL_FILE),--model $(SERVE_MODEL_FILE) --model-name $(SERVE_MODEL)) \
	    2>.cache/bench-serve/cloisond.log & pid=$$!; \
	  trap 'kill $$pid 2>/dev/null || true; wait $$pid 2>/dev/null || true' INT TERM EXIT; \
	  for i in $$(seq 1 120); do [ -s .cache/bench-serve/ready ] && break; kill -0 $$pid 2>/dev/null || exit 1; sleep 0.5; done; \
	  tok=$$(bin/cloisonctl --database-url "$$admin" token issue --tenant dev --subject bench-serve --ttl 2h --state-dir .cache/bench-serve); \
	  bench "http://$$(cat .cache/bench-serve/ready)" "$$tok"

# CUDA backend (kernels/cuda, build tag cuda). None of these need a GPU.
## cuda-toolchain: nvcc 11.8, the CUDA headers and the libcuda stub into ~/.cache/cloison-cuda (no GPU).
## From Debian bookworm non-free, unpacked by
## scripts/cuda-toolchain.sh (private apt lists; nothing installed, nothing
## committed; a no-op once cached).
CUDA_TOOLCHAIN := scripts/cuda-toolchain.sh
CUDA_SMS ?= 80 90
.PHONY: cuda-toolchain cuda-ptx cuda-check cuda-test-binary cuda-emu-test
cuda-toolchain:
	@$(CUDA_TOOLCHAIN) fetch

## cuda-ptx: compile kernels/cuda/kernels.cu into the committed, embedded PTX (sm80, sm90).
## Into kernels/cuda/ptx/kernels_sm{80,90}.ptx.
cuda-ptx: cuda-toolchain
	@set -e; for sm in $(CUDA_SMS); do \
	  $(CUDA_TOOLCHAIN) nvcc -ptx -arch=compute_$$sm -o kernels/cuda/ptx/kernels_sm$$sm.ptx kernels/cuda/kernels.cu; \
	  echo "kernels/cuda/ptx/kernels_sm$$sm.ptx"; done

## cuda-check: the PTX is up to date, -tags cuda vets and links, the host emulation passes (no GPU).
## The committed PTX is what kernels.cu compiles to and ptxas
## accepts it for each target; go vet -tags cuda, the kernels/cuda test
## binary and cmd/... compile and link (against the libcuda stub); the
## default build does not import gorgonia.org/cu.
cuda-check: cuda-toolchain
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  for sm in $(CUDA_SMS); do \
	    $(CUDA_TOOLCHAIN) nvcc -ptx -arch=compute_$$sm -o "$$tmp/kernels_sm$$sm.ptx" kernels/cuda/kernels.cu; \
	    cmp -s "$$tmp/kernels_sm$$sm.ptx" kernels/cuda/ptx/kernels_sm$$sm.ptx || { echo "kernels/cuda/ptx/kernels_sm$$sm.ptx is stale: run make cuda-ptx" >&2; exit 1; }; \
	    $(CUDA_TOOLCHAIN) ptxas -arch=sm_$$sm -o /dev/null kernels/cuda/ptx/kernels_sm$$sm.ptx; \
	  done; echo "cuda-check: PTX up to date, ptxas ok (sm $(CUDA_SMS))"; \
	  if $(GO) list -deps ./... | grep -q '^gorgonia.org/'; then echo "cuda-check: the default build imports gorgonia.org/cu" >&2; exit 1; fi; \
	  eval "$$($(CUDA_TOOLCHAIN) env)"; \
	  $(GO) vet -tags cuda ./...; \
	  $(GO) test -c -tags cuda -o "$$tmp/cuda.test" ./kernels/cuda/; \
	  $(GO) build -tags cuda -o "$$tmp/" ./cmd/...; \
	  echo "cuda-check: vet, test binary and cmd/... with -tags cuda: ok"
	@$(MAKE) --no-print-directory cuda-emu-test
	@echo "cuda-check: ok (no GPU needed or used)"

## cuda-emu-test: kernels.cu compiled for the host by g++, through the whole backend suite (no CUDA toolkit).
## kernels/cuda/hostemu.cc runs one fiber per CUDA thread; the suite is the kernelstest suite, the CPU comparison, the device
## tag-mismatch test and engine/model against kernels/cpu. No CUDA toolkit.
cuda-emu-test:
	$(GO) test -tags cudaemu -count=1 -run '^TestHostEmu' ./kernels/cuda/

## cuda-test-binary: bin/cuda.test, for scripts/cuda-device-check.sh on a GPU machine.
## That machine needs the NVIDIA driver, not Go.
cuda-test-binary: cuda-toolchain
	@set -e; mkdir -p bin; eval "$$($(CUDA_TOOLCHAIN) env)"; \
	  $(GO) test -c -tags cuda -o bin/cuda.test ./kernels/cuda/; echo bin/cuda.test
