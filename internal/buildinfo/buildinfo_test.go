package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestRequested(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{[]string{"--addr", "x", "--version"}, false},
		{[]string{"version"}, false},
		{[]string{"--version=true"}, false},
	} {
		if got := Requested(tc.args); got != tc.want {
			t.Errorf("Requested(%q): got %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{"v1.2.3", "abc", false, "go1.26.8"}, "cloisond v1.2.3 (commit abc, go1.26.8)"},
		{Info{"v1.2.3-4-gabc", "abc", true, "go1.26.8"}, "cloisond v1.2.3-4-gabc (commit abc-dirty, go1.26.8)"},
	} {
		if got := tc.in.String("cloisond"); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestReadGoVersion(t *testing.T) {
	in := Read()
	if in.Go != runtime.Version() || !strings.HasPrefix(in.Go, "go") {
		t.Errorf("got Go %q, want %q", in.Go, runtime.Version())
	}
	if in.Version == "" || in.Commit == "" {
		t.Errorf("empty field in %+v", in)
	}
}
