package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/tenancy"
)

// tokenFlags locate the deployment's signing keys: the key-encryption key
// under --state-dir seals them in the database.
type tokenFlags struct {
	stateDir, issuer, audience string
}

func (tf *tokenFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&tf.stateDir, "state-dir", envOr("CLOISON_STATE_DIR", ".cache/cloison"), "cloisond's state directory (holds signing.kek)")
	c.Flags().StringVar(&tf.issuer, "issuer", envOr("CLOISON_ISSUER", "cloison-dev"), "JWT issuer")
	c.Flags().StringVar(&tf.audience, "audience", envOr("CLOISON_AUDIENCE", "cloison"), "JWT audience")
}

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Issue API tokens (JWT, EdDSA)"}
	tf := &tokenFlags{}
	var tenant, subject, scopes string
	var ttl time.Duration
	issue := &cobra.Command{
		Use:   "issue",
		Short: "Issue a token for a tenant, signed with the deployment's current key",
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			pool, err := g.pool(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			kek, err := tenancy.LoadKEK(filepath.Join(tf.stateDir, "signing.kek"), false)
			if err != nil {
				return fmt.Errorf("key-encryption key (start cloisond once to create it): %w", err)
			}
			ring, err := tenancy.OpenKeyRing(ctx, tenancy.NewStore(pool), tf.issuer, kek)
			if err != nil {
				return err
			}
			var sc []tenancy.Scope
			for _, s := range strings.Split(scopes, ",") {
				p, err := tenancy.ParseScope(strings.TrimSpace(s))
				if err != nil {
					return err
				}
				sc = append(sc, p)
			}
			tok, err := tenancy.NewIssuer(ring).Issue(tenancy.TokenRequest{Subject: subject, Tenant: cloison.TenantID(tenant), Scopes: sc, Audience: tf.audience, TTL: ttl})
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), tok)
			return nil
		},
	}
	issue.Flags().StringVar(&tenant, "tenant", "", "tenant id (required)")
	issue.Flags().StringVar(&subject, "subject", envOr("USER", "cloisonctl"), "token subject")
	issue.Flags().StringVar(&scopes, "scopes", "infer", "comma-separated: infer, compliance:read, compliance:write, admin")
	issue.Flags().DurationVar(&ttl, "ttl", time.Hour, "lifetime")
	_ = issue.MarkFlagRequired("tenant")
	tf.register(issue)
	cmd.AddCommand(issue)
	return cmd
}

var _ = os.Stdout
