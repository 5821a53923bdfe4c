package main

import (
	"github.com/spf13/cobra"

	"github.com/cloison/cloison/internal/buildinfo"
)

// withVersion gives root cobra's --version flag, printing
// "cloisonctl VERSION (commit C, GO)" (internal/buildinfo).
func withVersion(root *cobra.Command) {
	root.Version = buildinfo.Read().String("cloisonctl")
	root.SetVersionTemplate("{{.Version}}\n")
}
