// Package buildinfo says which build of Cloison is running: the release
// version (stamped by the Makefile with -ldflags "-X
// github.com/cloison/cloison/internal/buildinfo.Version=$(git describe)"),
// the VCS commit and the Go version, the last two read from the build
// information the Go toolchain embeds (runtime/debug.ReadBuildInfo).
//
// cloisond --version and cloisonctl --version print String; the image label
// org.opencontainers.image.version carries the same Version.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version. The Makefile sets it from git describe;
// a plain go build leaves "devel", and Read then falls back to the main
// module's version when the binary was built by go install module@version.
var Version = "devel"

// Commit is the revision the Makefile stamps beside Version, used only when
// the toolchain recorded no vcs.revision: go build stamps it from a clone's
// .git directory but not from a git worktree (whose .git is a file) nor under
// GOFLAGS=-buildvcs=false.
var Commit = ""

// Info is one binary's build description.
type Info struct {
	Version  string // release version (git describe) or "devel"
	Commit   string // VCS revision, "unknown" when the build carried none
	Modified bool   // the working tree had uncommitted changes at build time
	Go       string // Go toolchain version, e.g. go1.26.8
}

// Read returns this binary's build description.
func Read() Info {
	in := Info{Version: Version, Commit: "unknown", Go: runtime.Version()}
	if Commit != "" {
		in.Commit = Commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if bi.GoVersion != "" {
		in.Go = bi.GoVersion
	}
	if in.Version == "devel" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one line --version prints: "NAME VERSION (commit C, GO)",
// with "-dirty" after the commit when the tree was modified.
func (in Info) String(name string) string {
	c := in.Commit
	if in.Modified {
		c += "-dirty"
	}
	return fmt.Sprintf("%s %s (commit %s, %s)", name, in.Version, c, in.Go)
}

// Requested reports whether args ask for the version: a first argument of
// --version or -version (the flag package accepts both spellings).
func Requested(args []string) bool {
	return len(args) > 0 && (args[0] == "--version" || args[0] == "-version")
}
