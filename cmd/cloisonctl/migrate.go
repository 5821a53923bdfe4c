package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison/migrations"
)

func newMigrateCmd(g *globals) *cobra.Command {
	roles := migrations.DefaultRoles
	var passwordFile string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create the owner and runtime roles if missing and apply pending migrations",
		Long: `Connects with --database-url as an administrator (a role that may create roles and
objects), creates the owner and runtime roles if missing, grants them what they need on this
database, and applies every pending embedded migration as the owner. With --runtime-password-file
it sets the runtime role's password (servers log in as that role with their own --database-url).
The other cloisonctl commands connect with whatever --database-url names: the runtime role's
URL suffices for reads and token issue; purges need the owner (--role).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.databaseURL == "" {
				return fmt.Errorf("set --database-url")
			}
			if passwordFile != "" {
				b, err := os.ReadFile(passwordFile)
				if err != nil {
					return err
				}
				if roles.RuntimePassword = strings.TrimRight(string(b), "\r\n"); roles.RuntimePassword == "" {
					return fmt.Errorf("--runtime-password-file %s is empty", passwordFile)
				}
			}
			applied, err := migrations.Up(cmd.Context(), g.databaseURL, roles)
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "schema up to date")
			}
			for _, v := range applied {
				fmt.Fprintf(cmd.OutOrStdout(), "applied migration %05d\n", v)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&roles.Owner, "owner-role", roles.Owner, "role that owns the ledger and register tables")
	cmd.Flags().StringVar(&roles.Runtime, "runtime-role", roles.Runtime, "role servers log in as (INSERT/SELECT only)")
	cmd.Flags().StringVar(&roles.Deployment, "deployment", "", "name marking the roles as this deployment's (as cloisond --db-deployment; empty: the database's name)")
	cmd.Flags().StringVar(&passwordFile, "runtime-password-file", "", "file holding the password to set on the runtime role")
	return cmd
}
