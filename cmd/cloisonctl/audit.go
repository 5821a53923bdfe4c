package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/cloison/cloison/internal/keyfile"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
)

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Verify and export the audit ledger"}
	cmd.AddCommand(newKeygenCmd(), newVerifyCmd(g), newLogCmd(), newExportCmd(g), newVerifyExportCmd())
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
	var lo logVerifyOptions
	var tenant string
	var entries []uint
	var wv *witnessVerify
	var receipts string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Verify the ledger: in the database (chain, checkpoints, tree, register) or from a server (--server: signed checkpoint, proofs)",
		Long: `Without --server: streams the ledger in one snapshot, recomputes every hash, checks every
checkpoint's signature and head (those in the database and those in --checkpoint-dir), recomputes the
Merkle tree and checks the latest tree note against it, then checks that every register version and
notice matches the digest the ledger chained. An empty ledger, or one that no signed checkpoint vouches
for, fails.

With --server URL: fetches the latest signed checkpoint (C2SP note) and checks its signature with
--verifier-key, a consistency proof from the checkpoint in --trusted (when the file exists), then
lists every entry and recomputes the tree's root from them (an entry deleted anywhere fails), or,
with --entry, checks only those entries' inclusion proofs; then stores the checkpoint in --trusted.
--tenant T checks tenant T's own log instead (the token's tenant).

--trusted FILE (both modes) holds the last verified tree checkpoint: a smaller tree, a fork, a missing
checkpoint or an empty ledger fails with its reason. Exit status 3 for a failed verification.

--receipts FILE (the Cloison-Receipt values a client kept, one a line) checks that each receipt's entry
is in the verified log: in the database, under the latest signed tree note; with --server, in the
checkpoint just verified (the whole log listed and recomputed; with --tenant, the tenant's own log: the
tenant's check of its receipts); with --witnesses K, in the latest checkpoint K witnesses cosigned. A receipt past its deadline (its time plus the maximum
merge delay, one minute) whose entry is missing fails, named by request and leaf hash: a tail cut
after the last checkpoint. One not yet due is listed as pending.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			lo.Entries = lo.Entries[:0]
			for _, e := range entries {
				lo.Entries = append(lo.Entries, uint64(e))
			}
			if lo.Server != "" {
				if err := wv.validate(); err != nil {
					return err
				}
				lo.Witnesses, lo.WitnessKeys, lo.WitnessURLs, lo.MaxAge = wv.k, wv.keys, wv.specs, wv.maxAge
				var err error
				if lo.VerifierKey, err = readVerifierKey(lo.VerifierKey); err != nil {
					return err
				}
				lo.Tenant = cloison.TenantID(tenant)
				rep, err := verifyLog(ctx, lo)
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), rep)
				if receipts != "" {
					return verifyServerReceipts(ctx, lo, rep.Head, rep.Cosigned, receipts, cmd.OutOrStdout())
				}
				return nil
			}
			if tenant != "" || len(lo.Entries) > 0 {
				return cloison.NewError(cloison.CodeInvalid, "--tenant and --entry need --server")
			}
			return verifyDatabase(ctx, g, cmd.OutOrStdout(), pubs, lo.Trusted, noRegister, wv, receipts)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&pubs, "public-key", nil, "trusted checkpoint public key file (repeatable)")
	f.BoolVar(&noRegister, "no-register", false, "skip the incident register check")
	f.StringVar(&lo.Server, "server", "", "verify a server's transparency log (base URL) instead of the database")
	f.StringVar(&lo.Token, "token", os.Getenv("CLOISON_TOKEN"), "bearer token for --server (env CLOISON_TOKEN)")
	f.StringVar(&lo.VerifierKey, "verifier-key", os.Getenv("CLOISON_VERIFIER_KEY"), "published note verifier key, or a file holding it (--server)")
	f.StringVar(&tenant, "tenant", "", "verify this tenant's own log (--server)")
	f.StringVar(&lo.Trusted, "trusted", "", "file holding the last verified tree checkpoint (created on first use)")
	f.StringVar(&receipts, "receipts", "", "file of receipts (Cloison-Receipt values, one a line) whose entries must be in the verified log once due")
	f.UintSliceVar(&entries, "entry", nil, "entry whose inclusion to check: ledger seq, or position in the tenant log (--server; default: list every entry and recompute the root)")
	wv = addWitnessVerifyFlags(cmd)
	return cmd
}

// verifyDatabase is audit verify without --server: the ledger in the
// database (chain, checkpoints, tree, witnesses' cosignatures, register),
// then the latest tree note a trusted key signed as the new trusted state.
func verifyDatabase(ctx context.Context, g *globals, out io.Writer, pubs []string, trustedFile string, noRegister bool, wv *witnessVerify, receipts string) error {
	keys, err := readPublicKeys(pubs)
	if err != nil {
		return err
	}
	var trusted []byte
	if trustedFile != "" {
		if trusted, err = os.ReadFile(trustedFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("trusted state: %w", err)
		}
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
	res, err := s.Verify(ctx, audit.VerifyOptions{Keys: keys, ExternalDir: g.checkpointDir, Trusted: trusted, Progress: func(seq uint64) {
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
	fmt.Fprintln(out, res)
	if err := wv.check(ctx, s, string(s.Origin()), keys, out); err != nil {
		return err
	}
	if !noRegister {
		if err := s.VerifyRegister(ctx); err != nil {
			return err
		}
		fmt.Fprintln(out, "register matches the ledger")
	}
	if receipts != "" {
		// Before the trusted state moves: a broken promise fails the run.
		if err := verifyReceiptsInDatabase(ctx, s, g.origin, keys, wv.k, receipts, out); err != nil {
			return err
		}
	}
	if trustedFile != "" {
		// Verify matched the latest stored tree note against the
		// recomputed tree: it is the new trusted state.
		// Only a note one of the trusted keys signed (a peer's
		// note under another key is left alone).
		latest, err := s.TreeCheckpoint(ctx)
		if err != nil && !errors.Is(err, audit.ErrNoCheckpoint) {
			return err
		}
		for _, pub := range keys {
			vk, err := audit.TreeVerifierKey(s.Origin(), pub)
			if err != nil || latest == nil {
				continue
			}
			if _, err := audit.OpenTreeHead(latest, vk); err == nil {
				return writeTrusted(trustedFile, latest)
			}
		}
	}
	return nil
}

func newLogCmd() *cobra.Command {
	var o tenantListOptions
	var tenant string
	cmd := &cobra.Command{
		Use:   "log",
		Short: "List a tenant's log from a server (--server, --tenant): rows by position, each checked against the signed tenant checkpoint",
		Long: `Fetches tenant T's signed checkpoint (checked with --verifier-key) and its ledger listing, which is its
tenant log: row N is position N, the number --entry takes in 'audit verify --tenant', and its payload is
the leaf as hashed (an entry naming other tenants too is a redacted view that counts them). Prints each
row as "position, kind, leaf", then checks them: listing the whole log (the default) recomputes the
tree from the rows and compares its root with the checkpoint's; a part (--from, --to) fetches one
inclusion proof per row. A row missing or not in the checkpoint exits 3. Keep consistency across runs
with 'audit verify --tenant T --trusted FILE'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.VerifierKey, err = readVerifierKey(o.VerifierKey); err != nil {
				return err
			}
			o.Tenant = cloison.TenantID(tenant)
			l, err := listTenantLog(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), l)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Server, "server", "", "base URL of a cloisond (required)")
	f.StringVar(&o.Token, "token", os.Getenv("CLOISON_TOKEN"), "bearer token, compliance:read (env CLOISON_TOKEN)")
	f.StringVar(&o.VerifierKey, "verifier-key", os.Getenv("CLOISON_VERIFIER_KEY"), "published note verifier key, or a file holding it")
	f.StringVar(&tenant, "tenant", "", "the tenant whose log to list: the token's own (another needs admin); required")
	f.Uint64Var(&o.From, "from", 1, "first position")
	f.Uint64Var(&o.To, "to", 0, "last position (0: the checkpoint's size)")
	return cmd
}

func newExportCmd(g *globals) *cobra.Command {
	var dir, manifestKey, actor string
	var regime export.Regime
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
			m, err := s.Export(ctx, export.Options{Dir: dir, From: from, To: to, Key: key, Actor: audit.Name(actor), Regime: regime, Progress: func(seq uint64) {
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
	cmd.Flags().Var(&regime, "register-regime", "act the register is kept under, cited in register.pdf: private (P-39.1, r. 3.1, the default) or public (A-2.1, r. 3.1)")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagRequired("manifest-key")
	return cmd
}

func newVerifyExportCmd() *cobra.Command {
	var manifestPubs, checkpointPubs []string
	var trustedFile string
	cmd := &cobra.Command{
		Use:   "verify-export DIR",
		Short: "Check an export offline: manifest signature, every file's SHA-256, the chain, its tree checkpoint, every register record and the PDF's rendering",
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
			fmt.Fprintf(cmd.OutOrStdout(), "tree checkpoint %s size %d matches the entries; %d register entries match the ledger; register.pdf is their rendering\n",
				rep.Tree.Origin, rep.Tree.Size, rep.Incidents)
			if !rep.SettingsChecked {
				fmt.Fprintln(cmd.OutOrStdout(), "register settings (the PDF's organisation and NEQ): none set")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&trustedFile, "trusted", "", "trusted checkpoint file: the export must extend it; it is replaced by the export's checkpoint")
	cmd.Flags().StringArrayVar(&manifestPubs, "manifest-public-key", nil, "trusted manifest public key file (repeatable)")
	cmd.Flags().StringArrayVar(&checkpointPubs, "checkpoint-public-key", nil, "trusted checkpoint public key file (repeatable)")
	return cmd
}
