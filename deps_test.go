package cloison

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependenciesPointOneWay holds ARCHITECTURE.md's package flow: engine
// never imports audit (it reports through hooks); policies imports neither
// engine nor api (the attestation it reads is package attest); isolation
// imports no other project package but the root's shared IDs and errors;
// attest imports no engine; nothing below api imports api (but its generated wire types) or cmd.
func TestDependenciesPointOneWay(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	const mod = "github.com/cloison/cloison"
	for _, c := range []struct {
		pkg       string
		forbidden []string // import path prefixes below mod
		only      []string // when set: the only project packages allowed
	}{
		{pkg: "./engine/...", forbidden: []string{"/audit", "/api", "/cmd", "/policies"}},
		{pkg: "./policies/...", forbidden: []string{"/engine", "/api", "/cmd"}},
		{pkg: "./attest/...", forbidden: []string{"/engine", "/api", "/cmd", "/audit"}},
		{pkg: "./isolation/...", only: []string{"", "/isolation"}},
		{pkg: "./audit/...", forbidden: []string{"/engine", "/api", "/cmd"}},
		{pkg: "./tenancy/...", forbidden: []string{"/engine", "/api", "/cmd"}},
	} {
		out, err := exec.Command(goBin, "list", "-deps", c.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", c.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			rest, ok := strings.CutPrefix(dep, mod)
			if !ok || (rest != "" && rest[0] != '/') || strings.HasPrefix(rest, "/api/proto/") {
				continue // the generated wire types are shared by every side
			}
			if c.only != nil {
				allowed := false
				for _, o := range c.only {
					allowed = allowed || rest == o || (o != "" && strings.HasPrefix(rest, o+"/"))
				}
				if !allowed {
					t.Errorf("%s imports %s", c.pkg, dep)
				}
				continue
			}
			for _, f := range c.forbidden {
				if rest == f || strings.HasPrefix(rest, f+"/") {
					t.Errorf("%s imports %s", c.pkg, dep)
				}
			}
		}
	}
}
