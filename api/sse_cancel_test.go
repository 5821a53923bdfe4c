package api_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// cutWriter is a ResponseWriter whose connection is cut after a few
// writes, as when a client stops reading past the write limit
// (api.Transport) or goes away: every write after that fails.
type cutWriter struct {
	*httptest.ResponseRecorder
	writes, after int
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if c.writes++; c.writes > c.after {
		return 0, errors.New("write: connection reset by peer")
	}
	return c.ResponseRecorder.Write(b)
}

// A streamed generation whose writes fail is cancelled, not run on to
// max_tokens for nobody: the request is ledgered as canceled with the few
// tokens it produced (before, the generation ran to its end with every write
// failing, holding a slot and the KV pages for nobody).
func TestStreamCancelledWhenWritesFail(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	from := head(t, p)
	const maxTokens = 400
	body := `{"model":"cloison-context-bag","prompt":"abcabc","max_tokens":400,"temperature":0,"stream":true}`
	req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.Token(t, "victim", tenancy.ScopeInfer))
	w := &cutWriter{ResponseRecorder: httptest.NewRecorder(), after: 3}
	p.Server.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("got status %d, want 200 (the stream had begun)", w.Code)
	}
	var done *audit.RequestCompleted
	for _, r := range rows(t, p, from) {
		if r.Kind == audit.KindRequestCompleted && r.Tenant == "victim" {
			env, err := audit.DecodeEnvelope(r.Payload)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := env.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			done = pl.(*audit.RequestCompleted)
		}
	}
	if done == nil {
		t.Fatal("got no request.completed row for the request")
	}
	if done.Status != cloison.CodeCanceled || done.CompletionTokens >= maxTokens {
		t.Fatalf("got status %q after %d completion tokens, want %s well before %d", done.Status, done.CompletionTokens, cloison.CodeCanceled, maxTokens)
	}
}
