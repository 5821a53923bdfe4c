# Cloison — build, test and run targets. See README.md.
SHELL := /bin/bash
GO ?= go
PKGS ?= ./...
BENCHTIME ?= 200ms
FUZZTIME ?= 20s

.PHONY: all build verify test bench fuzz clean

all: verify test

build:
	$(GO) build ./...

## verify: gofmt clean, go vet clean, go.mod tidy.
verify:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@cp go.mod /tmp/cloison-go.mod.bak; cp go.sum /tmp/cloison-go.sum.bak 2>/dev/null || true; \
	  $(GO) mod tidy; \
	  if ! git diff --quiet -- go.mod go.sum; then echo "go mod tidy changed go.mod/go.sum:"; git diff -- go.mod go.sum; exit 1; fi

## test: every test with the race detector, no cache. PostgreSQL first:
## scripts/pg.sh finds or starts one and prints its URL (fails if none).
test:
	@url=$$(scripts/pg.sh) || { echo "make test: no PostgreSQL (scripts/pg.sh failed)" >&2; exit 1; }; \
	  export DATABASE_URL="$$url"; echo "DATABASE_URL=$$url"; \
	  $(GO) test -race -count=1 $(PKGS) && \
	  echo "== property suites at full size, without the race detector (it slows the CPU kernels ~20x)" && \
	  $(GO) test -count=1 -run '$(FULL_SUITES)' ./engine/...

# Randomized suites that run reduced under -race and in full here.
FULL_SUITES ?= TestLeakOracle|TestIncidentLayers|TestCoTenantIndependence

## bench: every benchmark with a short benchtime (ends in minutes).
bench:
	@url=$$(scripts/pg.sh) || { echo "make bench: no PostgreSQL (scripts/pg.sh failed)" >&2; exit 1; }; \
	  export DATABASE_URL="$$url"; \
	  $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

## fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

clean:
	rm -rf bin .cache/go-build
