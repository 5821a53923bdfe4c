package cloison

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The house has one floor per folder, and imports point down:
//
//	cmd                                  (flags → node.Spec)
//	node, node/platformtest, node/probe  (the one node assembly)
//	api                                  (transport: routes, codecs, the error table's HTTP side)
//	service                              (the request path, without transport)
//	engine, engine/transfer, policies, tenancy, audit, attest, kernels, isolation
//	internal/*                           (ground-floor helpers)
//	cloison                              (the shared vocabulary: IDs, codes, tiers)
//
// TestDependenciesPointOneWay holds the rules between them: engine never
// imports audit (it reports through hooks); policies imports neither engine
// nor api (the attestation it reads is package attest); isolation imports
// no other project package but the root's shared IDs and errors; attest
// imports no engine; nothing below the service imports api (but the public
// API's generated wire types), node or cmd; the node-to-node protocol
// (engine/transfer and its prefill RPC) and the prefill node
// (node/prefill) import no api at all, so a prefill node links no public
// API; tenancy does not depend on isolation or attest, not even through
// another package (their shared vocabulary is the root package's); nothing under internal/
// imports a project package above it.
func TestDependenciesPointOneWay(t *testing.T) {
	const mod = "github.com/cloison/cloison"
	above := []string{"/api", "/node", "/cmd"}
	for _, c := range []struct {
		pkg       string
		forbidden []string // import path prefixes below mod
		only      []string // when set: the only project packages allowed
		// wire: the public API's generated protos are allowed, shared by
		// every side.
		wire bool
	}{
		{pkg: "./engine/...", forbidden: []string{"/audit", "/api", "/node", "/cmd", "/policies", "/service"}, wire: true},
		{pkg: "./engine/transfer/...", forbidden: []string{"/api", "/node", "/cmd", "/service"}},
		// A prefill node is the smallest node: it serves no public API
		// and links none.
		{pkg: "./node/prefill/...", forbidden: []string{"/api", "/cmd", "/service", "/policies"}},
		{pkg: "./policies/...", forbidden: []string{"/engine", "/api", "/node", "/cmd", "/service"}, wire: true},
		{pkg: "./attest/...", forbidden: []string{"/engine", "/api", "/node", "/cmd", "/audit", "/service"}, wire: true},
		{pkg: "./isolation/...", only: []string{"", "/isolation"}},
		{pkg: "./kernels/...", forbidden: []string{"/api", "/node", "/cmd", "/service"}},
		{pkg: "./audit/...", forbidden: []string{"/engine", "/api", "/node", "/cmd", "/service"}, wire: true},
		{pkg: "./tenancy/...", forbidden: []string{"/engine", "/api", "/node", "/cmd", "/service"}, wire: true},
		{pkg: "./tenancy/...", forbidden: []string{"/isolation", "/attest"}},
		{pkg: "./service/...", forbidden: above, wire: true},
		// The ground floor: the root package, other helpers, the generated
		// protos, and the embedded migrations (pgtest migrates a test
		// database; migrations imports nothing but the root package).
		{pkg: "./internal/...", only: []string{"", "/internal", "/migrations", "/api/proto", "/engine/transfer/proto"}},
		// The web console is static files and a handler over the node's
		// own API handler: it imports no project package, so it can hold
		// no privilege of its own.
		{pkg: "./console/...", only: []string{"/console"}},
	} {
		if dir, _, _ := strings.Cut(strings.TrimPrefix(c.pkg, "./"), "/..."); !exists(dir) {
			t.Logf("%s: no such folder on this branch; its rule waits for it", c.pkg)
			continue
		}
		for _, dep := range listImports(t, c.pkg) {
			rest, ok := strings.CutPrefix(dep, mod)
			if !ok || (rest != "" && rest[0] != '/') || (c.wire && strings.HasPrefix(rest, "/api/proto/")) {
				continue
			}
			if c.only != nil {
				if !hasPrefix(rest, c.only) {
					t.Errorf("%s imports %s", c.pkg, dep)
				}
				continue
			}
			if rest != "" && hasPrefix(rest, c.forbidden) {
				t.Errorf("%s imports %s", c.pkg, dep)
			}
		}
	}
}

// TestAPIImportsNoStore: api and the service speak to the ledger through
// audit's types (the service's ledger interface), never through the
// PostgreSQL store, not even through a package they import: the store is
// chosen where a node is assembled.
func TestAPIImportsNoStore(t *testing.T) {
	const store = "github.com/cloison/cloison/audit/postgres"
	for _, pkg := range []string{"./api/...", "./service/..."} {
		for _, dep := range listImports(t, pkg) {
			if dep == store || strings.HasPrefix(dep, store+"/") {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}

// listImports is every package pkg depends on, as go list -deps says.
func listImports(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command(goCommand(t), "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func goCommand(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	return goBin
}

// hasPrefix reports whether rest (an import path below the module) is one
// of prefixes or below one ("" is the root package itself).
func hasPrefix(rest string, prefixes []string) bool {
	for _, p := range prefixes {
		if rest == p || (p != "" && strings.HasPrefix(rest, p+"/")) {
			return true
		}
	}
	return false
}

// exists reports whether the folder dir is in this tree.
func exists(dir string) bool {
	fi, err := os.Stat(filepath.FromSlash(dir))
	return err == nil && fi.IsDir()
}
