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
// --witness-key (repeatable) and --witnesses K.
type witnessVerify struct {
	keys []string
	k    int
}

func addWitnessVerifyFlags(cmd *cobra.Command) *witnessVerify {
	w := &witnessVerify{}
	cmd.Flags().StringArrayVar(&w.keys, "witness-key", nil, "trusted witness verifier key (cloisonctl witness vkey; repeatable)")
	cmd.Flags().IntVar(&w.k, "witnesses", 0, "require the latest cosigned checkpoint to carry this many valid cosignatures of distinct --witness-key witnesses, and the ledger's tree to extend it")
	return w
}

// treeLog is what the witness check reads of the ledger
// (postgres.Store).
type treeLog interface {
	CosignedCheckpoint(ctx context.Context, min int) ([]byte, error)
	TreeCheckpoint(ctx context.Context) ([]byte, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) (tlog.TreeProof, error)
}

// check verifies, when --witnesses is set, the latest checkpoint with k
// cosignatures against the log's keys (pubs: the trusted checkpoint
// public keys) and that the latest tree checkpoint extends it.
func (w *witnessVerify) check(ctx context.Context, s treeLog, origin string, pubs map[string]ed25519.PublicKey, out io.Writer) error {
	if w.k == 0 && len(w.keys) == 0 {
		return nil
	}
	if w.k < 1 {
		return cloison.NewError(cloison.CodeInvalid, "--witness-key needs --witnesses K (K ≥ 1)")
	}
	if len(pubs) == 0 {
		return cloison.NewError(cloison.CodeInvalid, "--witnesses needs the log's --public-key")
	}
	cp, err := s.CosignedCheckpoint(ctx, w.k)
	if err != nil {
		return fmt.Errorf("no checkpoint with %d cosignatures: %w", w.k, err)
	}
	var lastErr error = audit.ErrNoCheckpoint
	for _, pub := range pubs {
		vkey, err := audit.TreeVerifierKey(audit.Name(origin), pub)
		if err != nil {
			return err
		}
		h, cs, err := audit.VerifyCosigned(cp, vkey, w.keys, w.k)
		if errors.Is(err, audit.ErrBadSignature) && !errors.Is(err, audit.ErrTooFewCosignatures) {
			lastErr = err
			continue // another trusted log key may have signed it
		}
		if err != nil {
			return err
		}
		latest, err := s.TreeCheckpoint(ctx)
		if err != nil {
			return err
		}
		lh, err := audit.OpenTreeHead(latest, vkey)
		if err != nil {
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
