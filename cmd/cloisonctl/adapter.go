package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
)

func printAdapter(w io.Writer, a api.AdapterInfo) {
	fmt.Fprintf(w, "%s\ttenant %s\tdigest %s\tmodel digest %s\trank %d\n", a.ID, a.Tenant, a.Digest, a.ModelDigest, a.Rank)
}

// newAdapterCmd acts on a running node's tenants' LoRA adapters (the admin
// API's adapter routes): register, unregister, list.
func newAdapterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "adapter", Short: "Register tenants' LoRA adapters on a running node (requested as <model>:<adapter>)"}
	var rf, uf, lf adminFlags
	var tenant, name, model string
	register := &cobra.Command{
		Use:   "register --tenant T --name N [--model M] PATH",
		Short: "Register the GGUF LoRA adapter at PATH (relative to the node's --model-dir) for one tenant; ledgered (adapter.registered)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var a api.AdapterInfo
			if err := rf.do(cmd.Context(), "POST", "/admin/v1/adapters", api.AdapterRegister{Tenant: cloison.TenantID(tenant), Name: name, Path: args[0], Model: model}, &a); err != nil {
				return err
			}
			printAdapter(cmd.OutOrStdout(), a)
			return nil
		},
	}
	rf.register(register)
	unregister := &cobra.Command{
		Use:   "unregister --tenant T --name N [--model M]",
		Short: "Stop serving one tenant's adapter; ledgered (adapter.unregistered)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var a api.AdapterInfo
			path := "/admin/v1/tenants/" + url.PathEscape(tenant) + "/adapters/" + url.PathEscape(name) + "?model=" + url.QueryEscape(model)
			if err := uf.do(cmd.Context(), "DELETE", path, nil, &a); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "unregistered %s (digest %s)\n", a.ID, a.Digest)
			return nil
		},
	}
	uf.register(unregister)
	for _, c := range []*cobra.Command{register, unregister} {
		c.Flags().StringVar(&tenant, "tenant", "", "the tenant the adapter serves (required)")
		c.Flags().StringVar(&name, "name", "", "the adapter's name: requests name it as <model>:<name> (required)")
		c.Flags().StringVar(&model, "model", "", "the served model it adapts (default: the node's first)")
		_ = c.MarkFlagRequired("tenant")
		_ = c.MarkFlagRequired("name")
	}
	list := &cobra.Command{
		Use:   "list --tenant T",
		Short: "List one tenant's adapters on a running node (digests, never weights)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Adapters []api.AdapterInfo `json:"adapters"`
			}
			if err := lf.do(cmd.Context(), "GET", "/admin/v1/tenants/"+url.PathEscape(tenant)+"/adapters", nil, &out); err != nil {
				return err
			}
			for _, a := range out.Adapters {
				printAdapter(cmd.OutOrStdout(), a)
			}
			return nil
		},
	}
	lf.register(list)
	list.Flags().StringVar(&tenant, "tenant", "", "the tenant (required)")
	_ = list.MarkFlagRequired("tenant")
	var pf adminFlags
	upload := &cobra.Command{
		Use:   "upload --name N [--model M] FILE",
		Short: "Upload the token's tenant's own GGUF LoRA adapter FILE (scope adapters:write); ledgered (adapter.registered)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			q := url.Values{"name": {name}, "digest": {hex.EncodeToString(sum[:])}}
			if model != "" {
				q.Set("model", model)
			}
			var a api.AdapterInfo
			if err := pf.do(cmd.Context(), "POST", "/v1/adapters?"+q.Encode(), data, &a); err != nil {
				return err
			}
			printAdapter(cmd.OutOrStdout(), a)
			return nil
		},
	}
	pf.register(upload)
	upload.Flags().Lookup("token").Usage = "bearer token of the tenant with the adapters:write scope (env CLOISON_TOKEN)"
	upload.Flags().StringVar(&name, "name", "", "the adapter's name: requests name it as <model>:<name> (required)")
	upload.Flags().StringVar(&model, "model", "", "the served model it adapts (default: the node's first)")
	_ = upload.MarkFlagRequired("name")
	cmd.AddCommand(register, unregister, list, upload)
	return cmd
}
