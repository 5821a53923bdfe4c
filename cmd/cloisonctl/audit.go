package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"github.com/cloison/cloison/internal/keyfile"
	"io/fs"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/audit/postgres"
)

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Verify and export the audit ledger"}
	cmd.AddCommand(newKeygenCmd(), newVerifyCmd(g), newExportCmd(g), newVerifyExportCmd())
	return cmd
}

func newKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Create an Ed25519 key pair (PATH and PATH.pub) for checkpoints or manifests",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			priv, err := keyfile.Write(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s.pub (key id %s)\n", out, out, audit.KeyID(priv.Public().(ed25519.PublicKey)))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "cloison-audit.key", "private key file (the public key goes to FILE.pub)")
	return cmd
}

// bar returns a progress bar to total on stderr, or nil when stderr is not
// worth drawing on (total unknown).
func bar(total uint64, what string) *progressbar.ProgressBar {
	if total == 0 {
		return nil
	}
	return progressbar.NewOptions64(int64(total), progressbar.OptionSetDescription(what),
		progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(), progressbar.OptionThrottle(200e6),
		progressbar.OptionClearOnFinish())
}

func newVerifyCmd(g *globals) *cobra.Command {
	var pubs []string
	var noRegister bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Recompute the whole chain, check every checkpoint (stored and external) and the register",
		Long: `Streams the ledger in one snapshot, recomputes every hash, checks every checkpoint's
signature and head (those in the database and those in --checkpoint-dir), then checks that every
register version and notice matches the digest the ledger chained. Exit status 3 and the first
broken sequence number when anything fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			keys, err := readPublicKeys(pubs)
			if err != nil {
				return err
			}
			s, done, err := g.store(ctx, false)
			if err != nil {
				return err
			}
			defer done()
			head, err := s.Head(ctx)
			if err != nil {
				return err
			}
			b := bar(head.Seq, "verifying")
			res, err := s.Verify(ctx, postgres.VerifyOptions{Keys: keys, ExternalDir: g.checkpointDir, Progress: func(seq uint64) {
				if b != nil {
					_ = b.Set64(int64(seq))
				}
			}})
			if b != nil {
				_ = b.Finish()
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res)
			if res.Checkpoints == 0 && res.Events > 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: no checkpoint matched; without checkpoints a truncated or rewritten chain cannot be detected")
			}
			if !noRegister {
				if err := s.VerifyRegister(ctx); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "register matches the ledger")
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&pubs, "public-key", nil, "trusted checkpoint public key file (repeatable)")
	cmd.Flags().BoolVar(&noRegister, "no-register", false, "skip the incident register check")
	return cmd
}

func newExportCmd(g *globals) *cobra.Command {
	var dir, manifestKey, actor string
	var from, to uint64
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export a ledger range and the register (JSON Lines, CSV, PDF) with a signed manifest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			key, err := keyfile.Private(manifestKey)
			if err != nil {
				return err
			}
			s, done, err := g.store(ctx, true)
			if err != nil {
				return err
			}
			defer done()
			head, err := s.Head(ctx)
			if err != nil {
				return err
			}
			b := bar(head.Seq, "exporting")
			m, err := s.Export(ctx, postgres.ExportOptions{Dir: dir, From: from, To: to, Key: key, Actor: audit.Name(actor), Progress: func(seq uint64) {
				if b != nil {
					_ = b.Set64(int64(seq))
				}
			}})
			if b != nil {
				_ = b.Finish()
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported ledger %d..%d and %d files to %s (manifest key %s)\n", m.From, m.To, len(m.Files), dir, m.KeyID)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "new directory for the export (required)")
	cmd.Flags().StringVar(&manifestKey, "manifest-key", "", "Ed25519 key file that signs the manifest (required)")
	cmd.Flags().StringVar(&actor, "actor", "cloisonctl", "who exports, recorded in the ledger (identifier)")
	cmd.Flags().Uint64Var(&from, "from", 1, "first ledger seq")
	cmd.Flags().Uint64Var(&to, "to", 0, "last ledger seq (0: the head)")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagRequired("manifest-key")
	return cmd
}

func newVerifyExportCmd() *cobra.Command {
	var manifestPubs, checkpointPubs []string
	var trustedFile string
	cmd := &cobra.Command{
		Use:   "verify-export DIR",
		Short: "Check an export offline: manifest signature, every file's SHA-256, the chain, its tree checkpoint and every register record",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mk, err := readPublicKeys(manifestPubs)
			if err != nil {
				return err
			}
			ck, err := readPublicKeys(checkpointPubs)
			if err != nil {
				return err
			}
			var trusted []byte
			if trustedFile != "" {
				if trusted, err = os.ReadFile(trustedFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			rep, err := export.VerifyDirTrusted(args[0], mk, ck, trusted)
			if err != nil {
				return err
			}
			if trustedFile != "" {
				// The export's checkpoint is the next trusted state.
				tmp := trustedFile + ".tmp"
				if err := os.WriteFile(tmp, rep.Note, 0o600); err != nil {
					return err
				}
				if err := os.Rename(tmp, trustedFile); err != nil {
					return err
				}
			}
			m := rep.Manifest
			fmt.Fprintf(cmd.OutOrStdout(), "manifest signed by %s on %s; %d files match\n", m.KeyID, m.Created.Format("2006-01-02 15:04:05Z"), len(m.Files))
			if rep.Ledger != nil {
				fmt.Fprintln(cmd.OutOrStdout(), *rep.Ledger)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tree checkpoint %s size %d matches the entries; %d register entries match the ledger\n",
				rep.Tree.Origin, rep.Tree.Size, rep.Incidents)
			return nil
		},
	}
	cmd.Flags().StringVar(&trustedFile, "trusted", "", "trusted checkpoint file: the export must extend it; it is replaced by the export's checkpoint")
	cmd.Flags().StringArrayVar(&manifestPubs, "manifest-public-key", nil, "trusted manifest public key file (repeatable)")
	cmd.Flags().StringArrayVar(&checkpointPubs, "checkpoint-public-key", nil, "trusted checkpoint public key file (repeatable)")
	return cmd
}
