package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/probe"
)

// newProbeCmd: the operator's pre-deployment and canary check (see
// node/probe). Exit status 0 when nothing was found, 4 on findings.
func newProbeCmd() *cobra.Command {
	var cfg probe.Config
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Check a running deployment: capacity attestation, canaries of tenant A never reaching tenant B, edge-length and over-long prompts refused",
		RunE: func(c *cobra.Command, _ []string) error {
			if cfg.TokenA == "" || cfg.TokenB == "" {
				return cloison.NewError(cloison.CodeInvalid, "probe needs --token-a and --token-b (two different tenants)")
			}
			if !asJSON {
				cfg.Log = func(format string, args ...any) { fmt.Fprintf(c.ErrOrStderr(), "probe: "+format+"\n", args...) }
			}
			rep, err := probe.Run(c.Context(), cfg)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			if asJSON {
				_ = json.NewEncoder(out).Encode(rep)
			} else {
				fmt.Fprintf(out, "requests %d: served %d, refused %d, aborted mid-stream %d; canaries planted %d\n",
					rep.Requests, rep.Served, rep.Refused, rep.Aborted, len(rep.Canaries))
				for _, f := range rep.Findings {
					fmt.Fprintf(out, "FINDING [%s] %s\n", f.Check, f.Detail)
				}
				if rep.OK() {
					fmt.Fprintln(out, "no finding")
				}
			}
			if !rep.OK() {
				os.Exit(4)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "deployment base URL")
	f.StringVar(&cfg.TokenA, "token-a", os.Getenv("CLOISON_PROBE_TOKEN_A"), "token of tenant A (plants canaries)")
	f.StringVar(&cfg.TokenB, "token-b", os.Getenv("CLOISON_PROBE_TOKEN_B"), "token of tenant B (sends edge-length prompts)")
	f.StringVar(&cfg.Model, "model", "cloison-context-bag", "model id")
	f.IntVar(&cfg.Canaries, "canaries", 8, "canary requests per wave (two waves)")
	f.IntVar(&cfg.Flood, "flood", 16, "concurrent requests in the flood")
	f.IntVar(&cfg.Aborts, "aborts", 4, "streams aborted after their first chunk")
	f.BoolVar(&cfg.Bag, "bag", false, "the model is the context-bag oracle: any output outside B's alphabet is a leak")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
