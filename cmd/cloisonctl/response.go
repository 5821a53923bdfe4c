package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
)

// A tenant's commands about responses it was served, so that a tenant need
// not take the operator's word for what it got:
// verify-response (do this prompt and completion match the request's
// entry, and is the entry in the tenant log? — checked offline against the
// published verifier key), report (a suspicious response) and replay.

// responseFlags are the flags these commands share.
type responseFlags struct {
	server, token string
	request       string
	prompt        string // text, or @file
	promptIDs     string // comma-separated ids
	messages      string // @file holding a JSON list of chat messages
	answer        []byte // the last answer's bytes, verbatim (--save keeps them: the payload must stay canonical)
}

func (f *responseFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.server, "server", os.Getenv("CLOISON_SERVER"), "base URL of a cloisond (env CLOISON_SERVER)")
	c.Flags().StringVar(&f.token, "token", os.Getenv("CLOISON_TOKEN"), "bearer token with the infer scope (env CLOISON_TOKEN)")
	c.Flags().StringVar(&f.request, "request", "", "request id (the X-Request-Id the response carried)")
}

func (f *responseFlags) registerPrompt(c *cobra.Command) {
	c.Flags().StringVar(&f.prompt, "prompt", "", "the prompt as sent (text, or @file)")
	c.Flags().StringVar(&f.promptIDs, "prompt-ids", "", "the prompt as token ids, comma-separated")
	c.Flags().StringVar(&f.messages, "messages", "", "@file holding the chat messages as sent (JSON list of {role, content})")
}

// textArg reads "@file" or returns v.
func textArg(v string) (string, error) {
	if name, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(name)
		return string(b), err
	}
	return v, nil
}

func idsArg(v string) ([]int32, error) {
	var ids []int32
	for _, s := range strings.Split(v, ",") {
		var id int32
		if _, err := fmt.Sscan(strings.TrimSpace(s), &id); err != nil {
			return nil, fmt.Errorf("token id %q: %v", s, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// promptBody sets the prompt fields of a request body.
func (f *responseFlags) promptBody(body map[string]any) error {
	n := 0
	if f.prompt != "" {
		n++
		t, err := textArg(f.prompt)
		if err != nil {
			return err
		}
		body["prompt"] = t
	}
	if f.promptIDs != "" {
		n++
		ids, err := idsArg(f.promptIDs)
		if err != nil {
			return err
		}
		body["prompt"] = ids
	}
	if f.messages != "" {
		n++
		t, err := textArg(f.messages)
		if err != nil {
			return err
		}
		body["messages"] = json.RawMessage(t)
	}
	if n != 1 {
		return fmt.Errorf("give exactly one of --prompt, --prompt-ids and --messages")
	}
	return nil
}

// post sends a JSON body and decodes the answer; a non-2xx answer is the
// server's typed error.
func (f *responseFlags) post(ctx context.Context, path string, body any, out any) error {
	if f.server == "" {
		return fmt.Errorf("--server is required")
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(f.server, "/")+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
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
		return cloison.Errorf(code, "server: POST %s: %d %s", path, resp.StatusCode, eb.Error.Message)
	}
	f.answer = rb
	return json.Unmarshal(rb, out)
}

// ErrNoMatch: the prompt or completion is not what the entry records (exit
// status 3).
var ErrNoMatch = cloison.NewError(cloison.CodeConflict, "the prompt or completion does not match what the platform recorded")

// checkVerifyAnswer checks a verify answer offline: the entry is in the
// tenant's log under the checkpoint (signed by the key vkey names), and it
// is request's request.completed entry. It returns the entry's payload.
func checkVerifyAnswer(res api.VerifyResult, vkey string, tenant cloison.TenantID) (audit.RequestCompleted, audit.TreeHead, error) {
	e := res.Entry
	proof := make(tlog.RecordProof, len(e.Proof))
	for i, h := range e.Proof {
		b, err := base64.StdEncoding.DecodeString(h)
		if err != nil || len(b) != len(proof[i]) {
			return audit.RequestCompleted{}, audit.TreeHead{}, fmt.Errorf("%w: proof hash %d", audit.ErrMalformed, i)
		}
		copy(proof[i][:], b)
	}
	env, err := audit.DecodeEnvelope(e.Payload)
	if err != nil {
		return audit.RequestCompleted{}, audit.TreeHead{}, err
	}
	if tenant == "" {
		tenant = env.Tenant
	}
	if env.Tenant != tenant {
		return audit.RequestCompleted{}, audit.TreeHead{}, fmt.Errorf("%w: the entry is tenant %s's, not %s's", audit.ErrNotIncluded, env.Tenant, tenant)
	}
	h, err := audit.VerifyTenantInclusion([]byte(e.Checkpoint), vkey, tenant, e.Position, e.Payload, proof)
	if err != nil {
		return audit.RequestCompleted{}, audit.TreeHead{}, err
	}
	p, err := env.DecodePayload()
	if err != nil {
		return audit.RequestCompleted{}, audit.TreeHead{}, err
	}
	rc, ok := p.(*audit.RequestCompleted)
	if !ok || rc.Request != res.Request {
		return audit.RequestCompleted{}, audit.TreeHead{}, fmt.Errorf("%w: the entry is not request %s's request.completed", audit.ErrNotIncluded, res.Request)
	}
	return *rc, h, nil
}

func newVerifyResponseCmd() *cobra.Command {
	var f responseFlags
	var completion, completionIDs, vkeyArg, tenant, save, offline string
	c := &cobra.Command{
		Use:   "verify-response",
		Short: "Check that a prompt and completion are what the platform served for a request, with the entry's tenant-log inclusion proof checked offline",
		Long: `verify-response asks the server whether the prompt and completion you hold
match the keyed digests its request.completed entry recorded, then checks
that entry's inclusion proof in your tenant log against the published
verifier key (--verifier-key, obtained out of band), without trusting the
server. --save keeps the answer; --offline FILE re-checks a saved answer
with no server. Exit status 3 when anything does not match.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			vkey, err := readVerifierKey(vkeyArg)
			if err != nil {
				return err
			}
			if vkey == "" {
				return fmt.Errorf("--verifier-key is required")
			}
			var res api.VerifyResult
			if offline != "" {
				b, err := os.ReadFile(offline)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(b, &res); err != nil {
					return fmt.Errorf("%w: %s: %v", audit.ErrMalformed, offline, err)
				}
			} else if res, err = askVerify(cmd.Context(), &f, completion, completionIDs, save); err != nil {
				return err
			}
			rc, h, err := checkVerifyAnswer(res, vkey, cloison.TenantID(tenant))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "entry: request %s, position %d of tenant log %s (size %d), inclusion proof verified offline\n", rc.Request, res.Entry.Position, h.Origin, h.Size)
			if rc.Served != nil {
				fmt.Fprintf(out, "recorded: model %s, backend %s/%s, temperature %s, seed %s (%s), max_tokens %d, digest key %s\n",
					rc.Served.ModelDigest, rc.Served.Backend, rc.Served.KernelPath, rc.Served.Sampling.Temperature, rc.Served.Sampling.Seed,
					rc.Served.Sampling.SeedSource, rc.Served.Sampling.MaxTokens, rc.Served.Key)
			}
			fmt.Fprintf(out, "prompt match: %v, completion match: %v\n", res.PromptMatch, res.CompletionMatch)
			if res.Reason != "" {
				fmt.Fprintf(out, "note: %s\n", res.Reason)
			}
			if !res.Match {
				return ErrNoMatch
			}
			fmt.Fprintln(out, "OK: this is what the platform served for this request")
			return nil
		},
	}
	f.register(c)
	f.registerPrompt(c)
	c.Flags().StringVar(&completion, "completion", "", "the completion as received (text, or @file)")
	c.Flags().StringVar(&completionIDs, "completion-ids", "", "the completion as token ids, comma-separated")
	c.Flags().StringVar(&vkeyArg, "verifier-key", os.Getenv("CLOISON_VERIFIER_KEY"), "published note verifier key, or a file holding it")
	c.Flags().StringVar(&tenant, "tenant", "", "your tenant id (default: the entry's; set it so that an entry of another tenant is refused)")
	c.Flags().StringVar(&save, "save", "", "write the server's answer (entry, proof, checkpoint) to this file")
	c.Flags().StringVar(&offline, "offline", "", "check a saved answer instead of asking a server")
	return c
}

// askVerify asks the server whether the prompt and the completion (text or
// token ids: exactly one) are what it served for f's request; save, when
// set, keeps its answer.
func askVerify(ctx context.Context, f *responseFlags, completion, completionIDs, save string) (api.VerifyResult, error) {
	var res api.VerifyResult
	body := map[string]any{}
	if err := f.promptBody(body); err != nil {
		return res, err
	}
	switch {
	case completion != "" && completionIDs == "":
		t, err := textArg(completion)
		if err != nil {
			return res, err
		}
		body["completion"] = t
	case completionIDs != "" && completion == "":
		ids, err := idsArg(completionIDs)
		if err != nil {
			return res, err
		}
		body["completion_tokens"] = ids
	default:
		return res, fmt.Errorf("give exactly one of --completion and --completion-ids")
	}
	if err := f.post(ctx, "/v1/requests/"+f.request+"/verify", body, &res); err != nil {
		return res, err
	}
	if save != "" {
		if err := os.WriteFile(save, f.answer, 0o600); err != nil {
			return res, err
		}
	}
	return res, nil
}

func newReportCmd() *cobra.Command {
	var f responseFlags
	var reason, foreign, details string
	c := &cobra.Command{
		Use:   "report",
		Short: "Report a suspicious response of one of your requests (opens a potential incident in the operator's register)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := map[string]any{"request": f.request, "reason": reason}
			if foreign != "" {
				t, err := textArg(foreign)
				if err != nil {
					return err
				}
				body["foreign_text"] = t
			}
			if details != "" {
				body["details"] = details
			}
			var res api.ReportResult
			if err := f.post(cmd.Context(), "/v1/reports", body, &res); err != nil {
				return err
			}
			dup := ""
			if res.Duplicate {
				dup = " (already reported)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report %s%s: incident %s, status %s\n", res.Report, dup, res.Incident, res.Status)
			return nil
		},
	}
	f.register(c)
	c.Flags().StringVar(&reason, "reason", "foreign-content", fmt.Sprintf("one of %v", audit.ReportReasons))
	c.Flags().StringVar(&foreign, "foreign-text", "", "the text you found foreign (text, or @file); sealed for your compliance officer, never ledgered")
	c.Flags().StringVar(&details, "details", "", "free text for your compliance officer (sealed like --foreign-text)")
	return c
}

func newReplayCmd() *cobra.Command {
	var f responseFlags
	var stop []string
	c := &cobra.Command{
		Use:   "replay",
		Short: "Re-run one of your requests alone with its recorded parameters and say whether what you were served is the prompt's own output",
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := map[string]any{}
			if err := f.promptBody(body); err != nil {
				return err
			}
			if len(stop) > 0 {
				body["stop"] = stop
			}
			var res api.ReplayResult
			if err := f.post(cmd.Context(), "/v1/requests/"+f.request+"/replay", body, &res); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "verdict: %s", res.Verdict)
			if res.Reason != "" {
				fmt.Fprintf(out, " (%s)", res.Reason)
			}
			fmt.Fprintf(out, "\nreplay %d µs, original %d µs\n", res.ReplayMicros, res.OriginalMicros)
			if res.Incident != "" {
				fmt.Fprintf(out, "report %s, incident %s updated\n", res.Report, res.Incident)
			}
			return nil
		},
	}
	f.register(c)
	f.registerPrompt(c)
	c.Flags().StringArrayVar(&stop, "stop", nil, "a stop string the request named (repeat; only their digest was recorded)")
	return c
}
