package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// platform is a platformtest.Platform with a completions helper.
type platform struct {
	*platformtest.Platform
	srvURL string
}

// send makes one request with a bearer token and reads the whole answer.
func send(t testing.TB, method, url, token, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func (p *platform) post(t *testing.T, tenant cloison.TenantID, body string) *http.Response {
	req, _ := http.NewRequest("POST", p.srvURL+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.Token(t, tenant, tenancy.ScopeInfer))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
