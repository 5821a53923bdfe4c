package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/internal/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// platform is a platformtest.Platform with a completions helper.
type platform struct {
	*platformtest.Platform
	srvURL string
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
