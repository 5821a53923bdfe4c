package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison/tenancy"
)

// actorFlag adds --actor to an admin command group: who acts, recorded in
// the ledger event of every change.
func actorFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().String("actor", envOr("CLOISON_ACTOR", "admin:"+envOr("USER", "cloisonctl")), "who acts, recorded in the ledger (identifier)")
}

// tenancyStore opens a tenancy store whose changes are ledgered in their
// own transaction (the ledger needs no checkpoint key here: the server's
// checkpoints cover these events), and a context carrying --actor.
func (g *globals) tenancyStore(cmd *cobra.Command) (*tenancy.Store, context.Context, func(), error) {
	actor, err := actorOf(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	ledger, done, err := g.store(cmd.Context(), false)
	if err != nil {
		return nil, nil, nil, err
	}
	return tenancy.NewStore(ledger.Pool()).WithLedger(ledger), tenancy.WithActor(cmd.Context(), actor), done, nil
}
