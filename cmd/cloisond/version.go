package main

import (
	"fmt"
	"io"

	"github.com/cloison/cloison/internal/buildinfo"
)

// printVersion writes "cloisond VERSION (commit C, GO)" for --version.
func printVersion(w io.Writer) {
	fmt.Fprintln(w, buildinfo.Read().String("cloisond"))
}
