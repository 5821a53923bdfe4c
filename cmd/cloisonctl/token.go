package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/tenancy"
)

// tokenFlags locate the deployment's signing keys: the key-encryption key
// (--kek-file, or signing.kek under a development --state-dir) seals them
// in the database.
type tokenFlags struct {
	stateDir, kekFile, issuer, audience string
	minRotate                           time.Duration
}

func (tf *tokenFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&tf.stateDir, "state-dir", envOr("CLOISON_STATE_DIR", ".cache/cloison"), "cloisond's state directory (holds signing.kek)")
	c.Flags().StringVar(&tf.kekFile, "kek-file", os.Getenv("CLOISON_KEK_FILE"), "the key-encryption key file cloisond's --kek-file names (default: signing.kek under --state-dir, a --dev node's)")
	c.Flags().StringVar(&tf.issuer, "issuer", envOr("CLOISON_ISSUER", "cloison-dev"), "JWT issuer")
	c.Flags().StringVar(&tf.audience, "audience", envOr("CLOISON_AUDIENCE", "cloison"), "JWT audience")
}

// ring opens the deployment's key ring over a ledgered store.
func (tf *tokenFlags) ring(g *globals, c *cobra.Command) (*tenancy.KeyRing, *tenancy.Store, func(), error) {
	path := tf.kekFile
	if path == "" {
		path = filepath.Join(tf.stateDir, "signing.kek")
	}
	kek, err := tenancy.LoadKEK(path, false)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("key-encryption key (--kek-file; a --dev cloisond creates one under --state-dir): %w", err)
	}
	s, ctx, done, err := g.tenancyStore(c)
	if err != nil {
		return nil, nil, nil, err
	}
	ring, err := tenancy.OpenKeyRing(ctx, s, tf.issuer, kek, tenancy.WithMinRotateInterval(tf.minRotate))
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return ring, s, done, nil
}

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Issue and revoke API tokens (JWT, EdDSA)"}
	actorFlag(cmd)
	tf := &tokenFlags{minRotate: tenancy.DefaultMinRotateInterval}
	var tenant, subject, scopes string
	var ttl time.Duration
	issue := &cobra.Command{
		Use:   "issue",
		Short: "Issue a token for a tenant, signed with the deployment's current key",
		RunE: func(c *cobra.Command, _ []string) error {
			ring, _, done, err := tf.ring(g, c)
			if err != nil {
				return err
			}
			defer done()
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
	issue.Flags().StringVar(&scopes, "scopes", "infer", "comma-separated: infer, compliance:read, compliance:write, admin, adapters:write")
	issue.Flags().DurationVar(&ttl, "ttl", time.Hour, "lifetime")
	_ = issue.MarkFlagRequired("tenant")
	tf.register(issue)
	cmd.AddCommand(issue, newTokenRevokeCmd(g))
	return cmd
}

// newTokenRevokeCmd puts one token on the revocation list: named by the
// token itself (its claims are read, not trusted: revoking is always safe)
// or by --jti, --issuer and --expires.
func newTokenRevokeCmd(g *globals) *cobra.Command {
	var token, jti, issuer, tenant, expires string
	cmd := &cobra.Command{
		Use:   "revoke",
		Short: "Revoke one token (--token, or --jti --issuer --expires); it stops verifying within seconds on every node",
		RunE: func(c *cobra.Command, _ []string) error {
			exp := time.Time{}
			if token != "" {
				var cl tenancy.Claims
				if _, _, err := jwt.NewParser().ParseUnverified(strings.TrimSpace(token), &cl); err != nil {
					return cloison.NewError(cloison.CodeInvalid, "token revoke: --token is not a JWT")
				}
				jti, issuer, tenant = cl.ID, cl.Issuer, cl.Tenant
				if cl.ExpiresAt != nil {
					exp = cl.ExpiresAt.Time
				}
			} else if expires != "" {
				var err error
				if exp, err = time.Parse(time.RFC3339, expires); err != nil {
					return cloison.NewError(cloison.CodeInvalid, "token revoke: --expires wants RFC 3339")
				}
			}
			s, ctx, done, err := g.tenancyStore(c)
			if err != nil {
				return err
			}
			defer done()
			if err := s.RevokeToken(ctx, issuer, jti, cloison.TenantID(tenant), exp); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "revoked %s of %s until %s\n", jti, issuer, exp.UTC().Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&token, "token", "", "the token to revoke")
	f.StringVar(&jti, "jti", "", "its jti claim")
	f.StringVar(&issuer, "issuer", envOr("CLOISON_ISSUER", "cloison-dev"), "its iss claim")
	f.StringVar(&expires, "expires", "", "its exp claim, RFC 3339")
	f.StringVar(&tenant, "tenant", "", "its tenant (optional, for the ledger event)")
	return cmd
}

// newKeyCmd lists, rotates and retires the JWT signing keys; each change
// is ledgered in its transaction.
func newKeyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "List, rotate and retire the JWT signing keys"}
	actorFlag(cmd)
	tf := &tokenFlags{}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the issuer's signing keys",
		RunE: func(c *cobra.Command, _ []string) error {
			ring, _, done, err := tf.ring(g, c)
			if err != nil {
				return err
			}
			defer done()
			return json.NewEncoder(c.OutOrStdout()).Encode(ring.Keys())
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Rotate: next becomes current (refused while the current key is younger than --min-interval)",
		RunE: func(c *cobra.Command, _ []string) error {
			ring, _, done, err := tf.ring(g, c)
			if err != nil {
				return err
			}
			defer done()
			if err := ring.Rotate(tenancy.WithActor(c.Context(), mustActor(c))); err != nil {
				return err
			}
			return json.NewEncoder(c.OutOrStdout()).Encode(ring.Keys())
		},
	}
	rotate.Flags().DurationVar(&tf.minRotate, "min-interval", tenancy.DefaultMinRotateInterval, "least age of the current key (at least the longest token lifetime)")
	retire := &cobra.Command{
		Use:   "retire [flags] -- KID",
		Short: "Retire one key (not the current one): its tokens stop verifying at the next key refresh",
		Long: "Retire one key (not the current one): its tokens stop verifying at the next key refresh.\n" +
			"A key id is a base64url JWK thumbprint and may begin with '-': write it after --.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ring, _, done, err := tf.ring(g, c)
			if err != nil {
				return err
			}
			defer done()
			if err := ring.Retire(tenancy.WithActor(c.Context(), mustActor(c)), args[0]); err != nil {
				return err
			}
			return json.NewEncoder(c.OutOrStdout()).Encode(ring.Keys())
		},
	}
	for _, sub := range []*cobra.Command{list, rotate, retire} {
		tf.register(sub)
	}
	cmd.AddCommand(list, rotate, retire)
	return cmd
}

// mustActor is --actor, already checked by tenancyStore.
func mustActor(c *cobra.Command) audit.Name {
	a, _ := actorOf(c)
	return a
}
