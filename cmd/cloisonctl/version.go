package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison/internal/buildinfo"
)

// printVersion writes "cloisonctl VERSION (commit C, GO)" for --version.
func printVersion(w io.Writer) {
	fmt.Fprintln(w, buildinfo.Read().String("cloisonctl"))
}

// withVersion gives root cobra's --version flag, printing printVersion's line.
func withVersion(root *cobra.Command) {
	root.Version = buildinfo.Read().String("cloisonctl")
	root.SetVersionTemplate("{{.Version}}\n")
}
