// Command cloisonctl administers a Cloison deployment: database migrations,
// the audit ledger (verify, export, verify-export) and the Loi 25
// confidentiality-incident register. Each command group lives in its own
// file (migrate.go, audit.go, incident.go); add new groups the same way and
// register them in newRoot.
//
// # Commands
//
// Shell completion through cloisonctl completion. It connects with whatever
// --database-url names — an administrator's for migrate, the owner for purges,
// the runtime role suffices for reads and token issue:
//
//   - migrate
//   - tenant create|list|update|suspend|activate, tenant client
//     create|list|revoke
//   - token issue --tenant T --scopes infer,...|revoke --token T
//   - key list|rotate|retire KID (every change ledgered, --actor)
//   - model synth [--bag|--lora BASE.gguf]|inspect, bench MODEL.gguf
//   - audit keygen|verify|export|verify-export
//   - incident list|show|open|update|notice|draft|purge
//   - witness, verify-response, report, replay
//   - load (the load generator behind make load)
//   - bench serve (a serving benchmark as vLLM's bench serve measures one:
//     Poisson, Gamma or fixed-rate arrivals or a fixed concurrency,
//     fixed, uniform or ShareGPT-like lengths, several tenants; TTFT,
//     TPOT, ITL, E2E, throughput and goodput as a table, vLLM's result
//     JSON and, for a sweep, an SVG plot; any OpenAI-compatible server;
//     docs/benchmarks.md)
//   - bench embed MODEL.gguf (an encoder's embeddings per second, the
//     batch in one forward step; --text FILE gives llama-embedding's
//     inputs: make peer-embed)
//   - probe
//   - cert init (a development CA and node certificates for node-to-node
//     mutual TLS; --labels NAME=REGION/TIER signs node labels)
//
// # Probe
//
// cloisonctl probe --url URL --token-a A --token-b B [--bag] is the operator's
// pre-deployment and canary check that the 2026 reports call for: it reads the
// capacity attestation and fails on a misaligned deployment (failed
// attestation, served context above the model's, pool below k × served
// context, and on a split deployment any prefill node refused or holding less
// than the served context; the edge lengths then probe the smallest pool);
// plants unique canaries as tenant A; as tenant B sends prompts of exactly B's
// advertised context − 2, − 1, ±0, + 1, the pool size ± 1 and twice it (as
// token ids, so lengths are exact), aborts streams mid-way and floods
// concurrently; and reports a finding when an over-long prompt is served, a
// request within B's context is refused, a stream ends in an error, or a
// canary — or, with --bag on the built-in context-bag model, any token outside
// B's own alphabet — reaches B's output. It prints a report (--json for
// machines) and exits 4 on any finding. It passes against a healthy cloisond
// (e2e test) and finds the leak on an in-process deployment with the 2026
// placeholder bug and every defence switched off (node/probe tests); it
// also passes against real decode + prefill processes and reports an
// in-process split deployment whose prefill pool is below the served context.
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cloison/cloison/internal/keyfile"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "cloisonctl: %v\n", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is 3 for a failed verification (a conflict: broken chain,
// smaller tree, fork; or no checkpoint, or an empty ledger), so that
// scripts tell it apart, and 1 for any other error.
func exitCode(err error) int {
	if cloison.ErrorCode(err) == cloison.CodeConflict || errors.Is(err, audit.ErrNoCheckpoint) || errors.Is(err, audit.ErrEmptyLedger) {
		return 3
	}
	return 1
}

// globals are the flags every command shares.
type globals struct {
	databaseURL   string
	role          string
	origin        string
	checkpointKey string
	checkpointDir string
	orgName       string
	orgNEQ        string
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "cloisonctl",
		Short:         "Administer Cloison: migrations, the audit ledger and the Loi 25 incident register",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	withVersion(root)
	f := root.PersistentFlags()
	f.StringVar(&g.databaseURL, "database-url", firstEnv("CLOISON_DATABASE_URL", "DATABASE_URL"), "PostgreSQL URL (env CLOISON_DATABASE_URL or DATABASE_URL)")
	f.StringVar(&g.role, "role", os.Getenv("CLOISON_DB_ROLE"), "role to SET after connecting (e.g. the owner role for purges)")
	f.StringVar(&g.origin, "origin", envOr("CLOISON_LEDGER_ORIGIN", ""), "ledger name in checkpoints and manifests (default: the origin the ledger recorded)")
	f.StringVar(&g.checkpointKey, "checkpoint-key", os.Getenv("CLOISON_CHECKPOINT_KEY"), "file holding the Ed25519 checkpoint signing key (see audit keygen)")
	f.StringVar(&g.checkpointDir, "checkpoint-dir", os.Getenv("CLOISON_CHECKPOINT_DIR"), "directory outside the database receiving checkpoint copies")
	f.StringVar(&g.orgName, "org-name", os.Getenv("CLOISON_ORG_NAME"), "organization named by entries opened before register settings are set (Règlement s. 3(1)); exports name the register settings, never this flag")
	f.StringVar(&g.orgNEQ, "org-neq", os.Getenv("CLOISON_ORG_NEQ"), "Québec enterprise number (NEQ)")
	root.AddCommand(newMigrateCmd(g), newAuditCmd(g), newIncidentCmd(g), newTokenCmd(g), newKeyCmd(g), newTenantCmd(g), newModelCmd(), newLoadCmd(), newProbeCmd(), newCertCmd(), newBenchCmd())
	root.AddCommand(newWitnessCmd(), newGrammarCmd())
	root.AddCommand(newVerifyResponseCmd(), newReportCmd(), newReplayCmd(), newAdapterCmd())
	return root
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// pool connects to the database, as g.role when set.
func (g *globals) pool(ctx context.Context) (*pgxpool.Pool, error) {
	if g.databaseURL == "" {
		return nil, cloison.NewError(cloison.CodeInvalid, "no database: set --database-url or CLOISON_DATABASE_URL")
	}
	cfg, err := pgxpool.ParseConfig(g.databaseURL)
	if err != nil {
		return nil, err
	}
	if g.role != "" {
		role := g.role
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize())
			return err
		}
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// store opens the ledger. The checkpoint key is optional for read-only
// commands (needKey false).
func (g *globals) store(ctx context.Context, needKey bool) (*postgres.Store, func(), error) {
	cfg := postgres.Config{Origin: audit.Name(g.origin), CheckpointDir: g.checkpointDir,
		Organization: audit.Organization{Name: g.orgName, NEQ: g.orgNEQ}}
	if g.checkpointKey != "" {
		k, err := keyfile.Private(g.checkpointKey)
		if err != nil {
			return nil, nil, err
		}
		cfg.SigningKey = k
	} else if needKey {
		return nil, nil, cloison.NewError(cloison.CodeInvalid, "this command appends to the ledger: set --checkpoint-key")
	}
	pool, err := g.pool(ctx)
	if err != nil {
		return nil, nil, err
	}
	if cfg.SigningKey != nil {
		// A key the cluster's nodes do not sign with would make their
		// verify report this command's checkpoints as forged.
		if _, err := postgres.CheckKey(ctx, pool, audit.CheckpointKey(cfg.SigningKey.Public().(ed25519.PublicKey)), audit.KeyPolicy{}); err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("--checkpoint-key: %w (give it the nodes' --log-key-file)", err)
		}
	}
	s, err := postgres.Open(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, func() { _ = s.Close(); pool.Close() }, nil
}
