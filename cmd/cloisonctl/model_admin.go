package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
)

// adminFlags reach a running cloisond's admin API.
type adminFlags struct{ server, token string }

func (f *adminFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.server, "server", os.Getenv("CLOISON_SERVER"), "base URL of a cloisond (env CLOISON_SERVER)")
	c.Flags().StringVar(&f.token, "token", os.Getenv("CLOISON_TOKEN"), "bearer token with the admin scope (env CLOISON_TOKEN)")
}

// do sends one request and decodes its answer into out; an error answer
// is returned as its code and message. A []byte body is sent as it is
// (application/octet-stream), any other as JSON.
func (f *adminFlags) do(ctx context.Context, method, path string, body, out any) error {
	if f.server == "" {
		return fmt.Errorf("--server is required")
	}
	var rd io.Reader
	ctype := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte: // a file, sent as it is
		rd, ctype = bytes.NewReader(b), "application/octet-stream"
	default:
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(f.server, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return cloison.NewError(cloison.CodeUnavailable, "server unreachable").Withf("%v", err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		_ = json.Unmarshal(rb, &eb)
		code := cloison.Code(eb.Error.Code)
		if code == "" {
			code = cloison.CodeUnavailable
		}
		return cloison.Errorf(code, "server: %s %s: %d %s", method, path, resp.StatusCode, eb.Error.Message)
	}
	return json.Unmarshal(rb, out)
}

func printModel(w io.Writer, m api.ModelInfo) {
	fmt.Fprintf(w, "%s\tdigest %s\t%d bytes\tserved context %d\t%d pages\n", m.ID, m.Digest, m.Bytes, m.ServedContext, m.PoolPages)
}

// newModelServedCmds are the model commands that act on a running node
// (the admin API's /admin/v1/models): list, load, unload.
func newModelServedCmds() []*cobra.Command {
	var lf, lo, un adminFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List the models a running node serves (digest, bytes its memory budget counts, pool)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out struct {
				Models []api.ModelInfo `json:"models"`
			}
			if err := lf.do(cmd.Context(), "GET", "/admin/v1/models", nil, &out); err != nil {
				return err
			}
			for _, m := range out.Models {
				printModel(cmd.OutOrStdout(), m)
			}
			return nil
		},
	}
	lf.register(list)
	var id string
	load := &cobra.Command{
		Use:   "load PATH",
		Short: "Load a model on a running node from its --model-dir (PATH relative to it) and serve it; ledgered (model.loaded)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var m api.ModelInfo
			if err := lo.do(cmd.Context(), "POST", "/admin/v1/models", api.ModelLoad{Path: args[0], ID: id}, &m); err != nil {
				return err
			}
			printModel(cmd.OutOrStdout(), m)
			return nil
		},
	}
	lo.register(load)
	load.Flags().StringVar(&id, "id", "", "model id requests name (default: general.name, else the file name without .gguf)")
	unload := &cobra.Command{
		Use:   "unload ID",
		Short: "Stop serving a model on a running node; ledgered (model.unloaded)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var m api.ModelInfo
			if err := un.do(cmd.Context(), "DELETE", "/admin/v1/models/"+args[0], nil, &m); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "unloaded %s (digest %s)\n", m.ID, m.Digest)
			return nil
		},
	}
	un.register(unload)
	return []*cobra.Command{list, load, unload}
}
