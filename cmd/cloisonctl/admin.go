package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison/tenancy"
)

// actorFlag adds --actor to an admin command group: who acts, recorded in
// the ledger event of every change.
func actorFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().String("actor", envOr("CLOISON_ACTOR", "admin:"+envOr("USER", "cloisonctl")), "who acts, recorded in the ledger (identifier)")
}

// tenancyStore opens a tenancy store whose changes are ledgered in their
// own transaction, and a context carrying --actor. The log key
// (--checkpoint-key) signs the events: the nodes refuse a tenant, client
// or key row whose last event it did not sign. Without the flag, a --dev
// node's key under its state directory (checkpoint.key, beside the
// signing.kek token issue reads) is used when there is one.
func (g *globals) tenancyStore(cmd *cobra.Command) (*tenancy.Store, context.Context, func(), error) {
	actor, err := actorOf(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	if g.checkpointKey == "" {
		dev := filepath.Join(envOr("CLOISON_STATE_DIR", ".cache/cloison"), "checkpoint.key")
		if _, err := os.Stat(dev); err == nil {
			g.checkpointKey = dev
		}
	}
	ledger, done, err := g.store(cmd.Context(), false)
	if err != nil {
		return nil, nil, nil, err
	}
	return tenancy.NewStore(ledger.Pool()).WithLedger(ledger), tenancy.WithActor(cmd.Context(), actor), done, nil
}
