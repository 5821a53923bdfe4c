package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

func newTenantCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tenant", Short: "Create, list, update and suspend tenants (each change ledgered)"}
	actorFlag(cmd)
	cmd.AddCommand(newTenantCreateCmd(g), newTenantListCmd(g), newTenantUpdateCmd(g), newTenantStatusCmd(g, "suspend", tenancy.StatusSuspended),
		newTenantStatusCmd(g, "activate", tenancy.StatusActive), newClientCmd(g))
	return cmd
}

// newTenantCreateCmd is tenant create.
func newTenantCreateCmd(g *globals) *cobra.Command {
	var t tenancy.Tenant
	var tier, zeroing, class, models, regions string
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
			t.Residency.Regions = regionList(regions)
			s, ctx, done, err := g.tenancyStore(c)
			if err != nil {
				return err
			}
			defer done()
			created, err := s.CreateTenant(ctx, t)
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
	f.IntVar(&t.NoticeDeadlineHours, "notice-deadline-hours", 0, "contractual deadline of the incident notice to the tenant, in hours (0: none)")
	f.StringVar(&regions, "regions", "", "residency: node regions its data may be processed in, comma-separated (empty: any)")
	f.StringVar(&t.Residency.Tier, "node-tier", "", "residency: node tier its data must be processed on (empty: any)")
	return create
}

// newTenantListCmd is tenant list.
func newTenantListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
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
}

// newTenantStatusCmd is tenant suspend or activate (use), setting st.
func newTenantStatusCmd(g *globals, use string, st tenancy.Status) *cobra.Command {
	return &cobra.Command{
		Use:   use + " ID",
		Short: strings.ToUpper(use[:1]) + use[1:] + " a tenant",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, ctx, done, err := g.tenancyStore(c)
			if err != nil {
				return err
			}
			defer done()
			t, err := s.SetStatus(ctx, cloison.TenantID(args[0]), st)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s %s\n", t.ID, t.Status)
			return nil
		},
	}
}

// newTenantUpdateCmd changes quotas, allowed models and the notice clause
// (incident contact, notice deadline); flags not given
// keep their value. kv-pages is the tenant's KV partition on every node and
// is not changed here.
func newTenantUpdateCmd(g *globals) *cobra.Command {
	var q tenancy.Quotas
	var models, contact, regions, nodeTier string
	var deadline int
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Change a tenant's quotas, allowed models, notice clause and residency (flags given only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			fl := c.Flags()
			if !slices.ContainsFunc([]string{"max-concurrent", "tokens-per-minute", "max-context", "models", "incident-contact", "notice-deadline-hours", "regions", "node-tier"}, fl.Changed) {
				return cloison.NewError(cloison.CodeInvalid, "tenant update: nothing to change (give --max-concurrent, --tokens-per-minute, --max-context, --models, --incident-contact, --notice-deadline-hours, --regions or --node-tier)")
			}
			s, ctx, done, err := g.tenancyStore(c)
			if err != nil {
				return err
			}
			defer done()
			t, err := s.UpdateTenant(ctx, cloison.TenantID(args[0]), func(t *tenancy.Tenant) error {
				if fl.Changed("max-concurrent") {
					t.Quotas.MaxConcurrent = q.MaxConcurrent
				}
				if fl.Changed("tokens-per-minute") {
					t.Quotas.TokensPerMinute = q.TokensPerMinute
				}
				if fl.Changed("max-context") {
					t.Quotas.MaxContext = q.MaxContext
				}
				if fl.Changed("models") {
					t.AllowedModels = []string{}
					if models != "" {
						t.AllowedModels = strings.Split(models, ",")
					}
				}
				if fl.Changed("incident-contact") {
					t.IncidentContact = contact
				}
				if fl.Changed("notice-deadline-hours") {
					t.NoticeDeadlineHours = deadline
				}
				if fl.Changed("regions") {
					t.Residency.Regions = regionList(regions)
				}
				if fl.Changed("node-tier") {
					t.Residency.Tier = nodeTier
				}
				return nil
			})
			if err != nil {
				return err
			}
			return json.NewEncoder(c.OutOrStdout()).Encode(t)
		},
	}
	f := cmd.Flags()
	f.IntVar(&q.MaxConcurrent, "max-concurrent", 0, "requests in flight")
	f.IntVar(&q.TokensPerMinute, "tokens-per-minute", 0, "token rate")
	f.IntVar(&q.MaxContext, "max-context", 0, "prompt + completion tokens per request (0: the engine's served context)")
	f.StringVar(&models, "models", "", "allowed model ids, comma-separated (replaces the list; empty: none)")
	f.StringVar(&contact, "incident-contact", "", "where confidentiality-incident notices go")
	f.IntVar(&deadline, "notice-deadline-hours", 0, "contractual deadline of the incident notice to the tenant, in hours (0: none)")
	f.StringVar(&regions, "regions", "", "residency: node regions its data may be processed in, comma-separated (replaces the list; empty: any)")
	f.StringVar(&nodeTier, "node-tier", "", "residency: node tier its data must be processed on (empty: any)")
	return cmd
}

// regionList is a comma-separated list of regions; empty: none (never nil).
func regionList(s string) []string {
	return append([]string{}, splitList(s)...)
}

// newClientCmd registers, lists and revokes a tenant's API clients (the
// JWT subjects the verifier checks on every request).
func newClientCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "client", Short: "Register, list and revoke a tenant's API clients"}
	var name, scopes string
	create := &cobra.Command{
		Use:   "create TENANT CLIENT-ID",
		Short: "Register an API client (its id is the tokens' sub)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			cl := tenancy.Client{Tenant: cloison.TenantID(args[0]), ID: args[1], Name: name}
			if cl.Name == "" {
				cl.Name = args[1]
			}
			for _, sc := range strings.Split(scopes, ",") {
				p, err := tenancy.ParseScope(strings.TrimSpace(sc))
				if err != nil {
					return err
				}
				cl.Scopes = append(cl.Scopes, p)
			}
			s, ctx, done, err := g.tenancyStore(c)
			if err != nil {
				return err
			}
			defer done()
			out, err := s.CreateClient(ctx, cl)
			if err != nil {
				return err
			}
			return json.NewEncoder(c.OutOrStdout()).Encode(out)
		},
	}
	create.Flags().StringVar(&name, "name", "", "display name (default: the id)")
	create.Flags().StringVar(&scopes, "scopes", "infer", "comma-separated: infer, compliance:read, compliance:write, admin, adapters:write")
	list := &cobra.Command{
		Use:   "list TENANT",
		Short: "List a tenant's API clients",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			pool, err := g.pool(c.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			cs, err := tenancy.NewStore(pool).Clients(c.Context(), cloison.TenantID(args[0]))
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tSCOPES")
			for _, cl := range cs {
				sc := make([]string, len(cl.Scopes))
				for i, s := range cl.Scopes {
					sc[i] = string(s)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", cl.ID, cl.Status, strings.Join(sc, ","))
			}
			return w.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke CLIENT-ID",
		Short: "Revoke an API client for good (its tokens stop verifying within seconds on every node)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, ctx, done, err := g.tenancyStore(c)
			if err != nil {
				return err
			}
			defer done()
			cl, err := s.RevokeClient(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s %s\n", cl.ID, cl.Status)
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
