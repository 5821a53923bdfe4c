package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestVersionFlag builds cloisonctl as the Makefile does (version stamped with
// -ldflags -X) and checks that --version prints the version, the commit the
// toolchain recorded and the Go version, and exits 0. (-buildvcs=auto:
// the environment here may carry GOFLAGS=-buildvcs=false.)
func TestVersionFlag(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cloisonctl")
	const v = "v9.9.9-versiontest"
	const stamped = "0123456789abcdef0123456789abcdef01234567"
	ld := "-X github.com/cloison/cloison/internal/buildinfo.Version=" + v + " -X github.com/cloison/cloison/internal/buildinfo.Commit=" + stamped
	build := exec.Command("go", "build", "-buildvcs=auto", "-ldflags", ld, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, arg := range []string{"--version"} {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil {
			t.Fatalf("cloisonctl %s: %v\n%s", arg, err, out)
		}
		got := strings.TrimSpace(string(out))
		re := regexp.MustCompile(`^cloisonctl ` + regexp.QuoteMeta(v) + ` \(commit ([0-9a-f]{40}|unknown)(-dirty)?, ` + regexp.QuoteMeta(runtime.Version()) + `\)$`)
		m := re.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("cloisonctl %s: got %q, want it to match %s", arg, got, re)
		}
		// In a clone (.git a directory) the toolchain stamps HEAD, which wins
		// over the -X value; elsewhere (a git worktree, no git) the -X value.
		want := stamped
		if fi, err := os.Stat("../../.git"); err == nil && fi.IsDir() {
			if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
				want = strings.TrimSpace(string(head))
			}
		}
		if m[1] != want {
			t.Errorf("cloisonctl %s: got commit %s, want %s", arg, m[1], want)
		}
	}
}
