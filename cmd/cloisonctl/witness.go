package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/witness"
	"github.com/cloison/cloison/internal/keyfile"
)

// newWitnessCmd is `cloisonctl witness`: a C2SP tlog-witness for Cloison
// ledgers (package audit/witness), with its own key and state file.
func newWitnessCmd() *cobra.Command {
	var keyPath, statePath, addr, name, readyFile string
	var logs []string
	cmd := &cobra.Command{
		Use:   "witness",
		Short: "Run a transparency-log witness (C2SP tlog-witness) that cosigns a ledger's consistent checkpoints",
		Long: `Serves POST /add-checkpoint on --addr. It cosigns a checkpoint of a --log only when the log's key
signed it and a consistency proof from the size it last cosigned shows that the new tree extends it; the
state (per log: the last cosigned size and root) is in --state, replaced atomically before any answer.
--key is the witness's own Ed25519 key (cloisonctl witness vkey --create writes one and prints the
verifier key to give to cloisond --witness and to verifiers). Never run a witness with an empty or lost
state file and its old key: give it a new key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := keyfile.Private(keyPath)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			w, err := witness.New(witness.Config{Name: name, Key: key, Logs: logs, StatePath: statePath, Logger: log})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			hs := &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
				WriteTimeout: 30 * time.Second, MaxHeaderBytes: 16 << 10}
			log.Info("witness serving", "addr", ln.Addr().String(), "vkey", w.VerifierKey(), "logs", len(logs))
			if readyFile != "" {
				if err := os.WriteFile(readyFile, []byte(ln.Addr().String()), 0o600); err != nil {
					ln.Close()
					return err
				}
			}
			done := make(chan error, 1)
			go func() { done <- hs.Serve(ln) }()
			select {
			case err := <-done:
				return err
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := hs.Shutdown(ctx); err != nil {
				return err
			}
			if err := <-done; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyPath, "key", "", "the witness's Ed25519 key file (required)")
	f.StringVar(&statePath, "state", "", "the witness's state file (required)")
	f.StringVar(&addr, "addr", "127.0.0.1:7380", "listen address")
	f.StringVar(&name, "name", "", "the witness's key name, a schema-less URL such as witness.example.org/w1 (required)")
	f.StringArrayVar(&logs, "log", nil, "note verifier key of a log to witness (what cloisond logs as tree_vkey; repeatable, required)")
	f.StringVar(&readyFile, "ready-file", "", "write the listen address to this file once serving (tests)")
	for _, r := range []string{"key", "state", "name", "log"} {
		_ = cmd.MarkFlagRequired(r)
	}
	cmd.AddCommand(newWitnessVKeyCmd())
	return cmd
}

func newWitnessVKeyCmd() *cobra.Command {
	var keyPath, name string
	var create bool
	cmd := &cobra.Command{
		Use:   "vkey",
		Short: "Print a witness's verifier key (creating its key file with --create)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var key ed25519.PrivateKey
			var err error
			if create {
				key, err = keyfile.Write(keyPath)
			} else {
				key, err = keyfile.Private(keyPath)
			}
			if err != nil {
				return err
			}
			vkey, err := audit.CosignerVerifierKey(name, key.Public().(ed25519.PublicKey))
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), vkey)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "the witness's Ed25519 key file (required)")
	cmd.Flags().StringVar(&name, "name", "", "the witness's key name (required)")
	cmd.Flags().BoolVar(&create, "create", false, "create the key file (refused if it exists)")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// witnessVerify is the witness part of `cloisonctl audit verify`:
// --witness URL=VKEY (repeatable, the witnesses asked), --witness-key
// (repeatable, cosignatures read from the log), --witnesses K and
// --max-cosignature-age.
type witnessVerify struct {
	keys   []string
	specs  []string // URL=VKEY
	k      int
	maxAge time.Duration
}

func addWitnessVerifyFlags(cmd *cobra.Command) *witnessVerify {
	w := &witnessVerify{}
	cmd.Flags().StringArrayVar(&w.specs, "witness", nil, "a witness to ask for the latest checkpoint of this log it cosigned: URL=VKEY (repeatable); the log's tree must extend every answer")
	cmd.Flags().StringArrayVar(&w.keys, "witness-key", nil, "trusted witness verifier key (cloisonctl witness vkey; repeatable): cosignatures read from the log, each no older than --max-cosignature-age")
	cmd.Flags().IntVar(&w.k, "witnesses", 0, "require this many witnesses: with --witness, K answers the log's tree extends; with --witness-key alone, the latest cosigned checkpoint with K recent cosignatures, which the tree extends")
	cmd.Flags().DurationVar(&w.maxAge, "max-cosignature-age", 0, "with --witness-key alone (required there): the oldest cosignature accepted; a database rolled back further than this cannot pass")
	return w
}

// validate checks the flags' combination.
func (w *witnessVerify) validate() error {
	if w.k == 0 && len(w.keys) == 0 && len(w.specs) == 0 {
		return nil
	}
	if w.k < 1 {
		return cloison.NewError(cloison.CodeInvalid, "--witness and --witness-key need --witnesses K (K ≥ 1)")
	}
	if len(w.specs) == 0 && w.maxAge <= 0 {
		// Cosignatures kept by the log survive a rollback of its
		// database: only recent ones, or the witnesses asked, say
		// anything about the log now.
		return cloison.NewError(cloison.CodeInvalid, "--witnesses K needs --witness URL=VKEY (ask the witnesses) or --witness-key with --max-cosignature-age")
	}
	if len(w.specs) > 0 && w.k > len(w.specs) {
		return cloison.Errorf(cloison.CodeInvalid, "--witnesses %d but %d --witness given", w.k, len(w.specs))
	}
	return nil
}

// clients are the --witness witnesses.
func (w *witnessVerify) clients() ([]*witness.Client, error) {
	var out []*witness.Client
	for _, spec := range w.specs {
		u, vkey, ok := strings.Cut(spec, "=")
		if !ok || u == "" || vkey == "" {
			return nil, cloison.Errorf(cloison.CodeInvalid, "--witness %q: want URL=VKEY", spec)
		}
		c, err := witness.NewClient(u, vkey, 0, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// fresh checks that every cosignature is at most maxAge old.
func (w *witnessVerify) fresh(cs []audit.Cosignature, now time.Time) error {
	for _, c := range cs {
		if age := now.Sub(c.Time); age > w.maxAge {
			return fmt.Errorf("%w: witness %s cosigned at %s, %s ago (--max-cosignature-age %s): the log may have been rolled back since",
				audit.ErrStaleCosignature, c.Witness, c.Time.Format(time.RFC3339), age.Round(time.Second), w.maxAge)
		}
	}
	return nil
}

// treeLog is what the witness check reads of the ledger
// (postgres.Store).
type treeLog interface {
	CosignedCheckpoint(ctx context.Context, min int) ([]byte, error)
	TreeCheckpoint(ctx context.Context) ([]byte, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) (tlog.TreeProof, error)
}

// check verifies, when --witnesses is set, the ledger against the
// witnesses: asked (--witness), or their recent cosignatures read from the
// ledger (--witness-key, --max-cosignature-age). pubs are the trusted
// checkpoint public keys.
func (w *witnessVerify) check(ctx context.Context, s treeLog, origin string, pubs map[string]ed25519.PublicKey, out io.Writer) error {
	if err := w.validate(); err != nil || w.k == 0 {
		return err
	}
	if len(pubs) == 0 {
		return cloison.NewError(cloison.CodeInvalid, "--witnesses needs the log's --public-key")
	}
	latest, err := s.TreeCheckpoint(ctx)
	if err != nil {
		return err
	}
	var lastErr error = audit.ErrNoCheckpoint
	for _, pub := range pubs {
		vkey, err := audit.TreeVerifierKey(audit.Name(origin), pub)
		if err != nil {
			return err
		}
		lh, err := audit.OpenTreeHead(latest, vkey)
		if errors.Is(err, audit.ErrBadSignature) {
			lastErr = err
			continue // another trusted log key may have signed it
		}
		if err != nil {
			return err
		}
		if len(w.specs) > 0 {
			return w.asked(ctx, vkey, lh, s.ConsistencyProof, out)
		}
		cp, err := s.CosignedCheckpoint(ctx, w.k)
		if err != nil {
			return fmt.Errorf("no checkpoint with %d cosignatures: %w", w.k, err)
		}
		h, cs, err := audit.VerifyCosigned(cp, vkey, w.keys, w.k)
		if err != nil {
			return err
		}
		if err := w.fresh(cs, time.Now()); err != nil {
			return err
		}
		proof, err := s.ConsistencyProof(ctx, h.Size, lh.Size)
		if err != nil {
			return err
		}
		if _, err := audit.VerifyConsistency(vkey, cp, latest, proof); err != nil {
			return err
		}
		fmt.Fprintf(out, "checkpoint of size %d cosigned by %d witness(es)", h.Size, len(cs))
		for _, c := range cs {
			fmt.Fprintf(out, " %s@%s", c.Witness, c.Time.Format(time.RFC3339))
		}
		fmt.Fprintf(out, "; the tree of size %d extends it\n", lh.Size)
		return nil
	}
	return lastErr
}

// asked asks the --witness witnesses for their latest cosigned checkpoint
// and requires head to be consistent with every answer.
func (w *witnessVerify) asked(ctx context.Context, vkey string, head audit.TreeHead, proof witness.ProofFunc, out io.Writer) error {
	clients, err := w.clients()
	if err != nil {
		return err
	}
	obs, err := witness.VerifyWitnessed(ctx, clients, vkey, head, proof, w.k)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "tree of size %d is consistent with %d witness(es) asked:", head.Size, len(obs))
	for _, o := range obs {
		fmt.Fprintf(out, " %s cosigned size %d@%s", o.Witness, o.Head.Size, o.Time.Format(time.RFC3339))
	}
	fmt.Fprintln(out)
	return nil
}
