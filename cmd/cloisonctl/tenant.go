package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

func newTenantCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "Create, list and suspend tenants"}
	var t tenancy.Tenant
	var tier, zeroing, class, models string
	create := &cobra.Command{
		Use:   "create ID",
		Short: "Create a tenant",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			t.ID = cloison.TenantID(args[0])
			if t.Name == "" {
				t.Name = args[0]
			}
			t.Status = tenancy.StatusActive
			if t.Tier, err = isolation.ParseTier(tier); err != nil {
				return err
			}
			if t.Zeroing, err = isolation.ParseZeroing(zeroing); err != nil {
				return err
			}
			if t.Classification, err = tenancy.ParseClassification(class); err != nil {
				return err
			}
			if models != "" {
				t.AllowedModels = strings.Split(models, ",")
			}
			pool, err := g.pool(c.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			created, err := tenancy.NewStore(pool).CreateTenant(c.Context(), t)
			if err != nil {
				return err
			}
			return json.NewEncoder(c.OutOrStdout()).Encode(created)
		},
	}
	f := create.Flags()
	f.StringVar(&t.Name, "name", "", "display name")
	f.StringVar(&tier, "tier", "shared", "isolation tier: shared or dedicated")
	f.StringVar(&zeroing, "zeroing", "cross-tenant", "KV zeroing: never, cross-tenant or always")
	f.StringVar(&class, "classification", "internal", "data classification: public, internal, confidential, personal")
	f.IntVar(&t.Quotas.MaxConcurrent, "max-concurrent", 16, "requests in flight")
	f.IntVar(&t.Quotas.KVPages, "kv-pages", 512, "KV page cap (dedicated: reserved pages)")
	f.IntVar(&t.Quotas.TokensPerMinute, "tokens-per-minute", 200000, "token rate")
	f.IntVar(&t.Quotas.MaxContext, "max-context", 1<<20, "prompt + completion tokens per request")
	f.StringVar(&models, "models", "cloison-context-bag", "allowed model ids, comma-separated (an explicit list: no wildcard)")
	f.StringVar(&t.IncidentContact, "incident-contact", "", "where confidentiality-incident notices go")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tenants",
		RunE: func(c *cobra.Command, _ []string) error {
			pool, err := g.pool(c.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			ts, err := tenancy.NewStore(pool).Tenants(c.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tTIER\tZEROING\tCLASSIFICATION\tKV PAGES")
			for _, t := range ts {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", t.ID, t.Status, t.Tier, t.Zeroing, t.Classification, t.Quotas.KVPages)
			}
			return w.Flush()
		},
	}
	status := func(use string, st tenancy.Status) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID",
			Short: strings.ToUpper(use[:1]) + use[1:] + " a tenant",
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				pool, err := g.pool(c.Context())
				if err != nil {
					return err
				}
				defer pool.Close()
				t, err := tenancy.NewStore(pool).SetStatus(c.Context(), cloison.TenantID(args[0]), st)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "%s %s\n", t.ID, t.Status)
				return nil
			},
		}
	}
	cmd.AddCommand(create, list, status("suspend", tenancy.StatusSuspended), status("activate", tenancy.StatusActive))
	return cmd
}
