package api_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestExportRouteAuthzLedgerAndVerify: the HTTP export is an operator
// officer's (a tenant's compliance:read token gets 403), it is ledgered
// (export.created under the caller), each format answers its file as an
// attachment, and the verify route says a good export verifies and one
// with a byte of its PDF altered does not.
func TestExportRouteAuthzLedgerAndVerify(t *testing.T) {
	ctx := context.Background()
	_, ek, _ := ed25519.GenerateKey(rand.Reader)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}, API: func(c *api.Config) { c.ExportKey = ek }})
	admin := p.Token(t, "alpha", tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	tenant := p.Token(t, "alpha", tenancy.ScopeComplianceRead)
	if _, err := p.Ledger.OpenFromDetection(ctx, "engine:test", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "scrub",
		DetectedAt: time.Now(), AffectedTenants: []cloison.TenantID{"alpha"}, AffectedRequests: []cloison.RequestID{"req-1"},
		AffectedResponses: 1, Model: platformtest.Model}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	exports := func() int {
		n := 0
		if err := p.Ledger.Scan(ctx, 1, 0, func(r audit.Record) error {
			if r.Kind == audit.KindExportCreated {
				n++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, path := range []string{"/compliance/v1/export?format=zip", "/compliance/v1/export/verify"} {
		method := "GET"
		if strings.HasSuffix(path, "verify") {
			method = "POST"
		}
		if code, _, b := call(t, p, method, path, tenant, ""); code != 403 {
			t.Errorf("%s %s with a tenant token: %d %s, want 403", method, path, code, b)
		}
	}
	if n := exports(); n != 0 {
		t.Fatalf("refused exports ledgered %d exports", n)
	}
	if code, _, b := call(t, p, "GET", "/compliance/v1/export?format=docx", admin, ""); code != 400 {
		t.Errorf("format docx: %d %s, want 400", code, b)
	}
	if code, _, b := call(t, p, "GET", "/compliance/v1/export?format=pdf&tenant=alpha", admin, ""); code != 400 {
		t.Errorf("an unknown parameter: %d %s, want 400", code, b)
	}
	for _, c := range []struct{ format, ctype, prefix string }{
		{"pdf", "application/pdf", "%PDF-"}, {"csv", "text/csv", ""}, {"jsonl", "application/jsonl", "{"}, {"zip", "application/zip", "PK"},
	} {
		resp, b := send(t, "GET", p.URL+"/compliance/v1/export?format="+c.format, admin, "")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) || !strings.HasPrefix(string(b), c.prefix) ||
			resp.Header.Get("Content-Disposition") != `attachment; filename="cloison-export.`+c.format+`"` {
			t.Errorf("format %s: %d %v %.40q", c.format, resp.StatusCode, resp.Header, b)
		}
	}
	if n := exports(); n != 4 {
		t.Errorf("4 exports ledgered %d export.created rows, want 4", n)
	}
	resp, zipped := send(t, "GET", p.URL+"/compliance/v1/export?format=zip", admin, "")
	if resp.StatusCode != 200 {
		t.Fatalf("zip: %d %s", resp.StatusCode, zipped)
	}
	type verdict struct {
		OK     bool   `json:"ok"`
		Result string `json:"result"`
	}
	verify := func(body []byte) verdict {
		t.Helper()
		code, _, b := call(t, p, "POST", "/compliance/v1/export/verify", admin, string(body))
		var v verdict
		if err := json.Unmarshal(b, &v); code != 200 || err != nil {
			t.Fatalf("verify: %d %s %v", code, b, err)
		}
		return v
	}
	if v := verify(zipped); !v.OK || !strings.HasPrefix(v.Result, "verified") {
		t.Errorf("the export as answered: %+v, want verified", v)
	}
	if v := verify(rezip(t, zipped, "register.pdf")); v.OK || !strings.Contains(v.Result, "failed") {
		t.Errorf("a byte of the PDF altered: %+v, want a failure", v)
	}
	if v := verify(rezip(t, zipped, "ledger.jsonl")); v.OK {
		t.Errorf("a byte of the ledger altered: %+v, want a failure", v)
	}
	// One file, with the manifest the export route answered beside it.
	resp, pdf := send(t, "GET", p.URL+"/compliance/v1/export?format=pdf", admin, "")
	manifest := resp.Header.Get("Cloison-Export-Manifest")
	verifyFile := func(body []byte, manifest string) verdict {
		t.Helper()
		req, _ := http.NewRequest("POST", p.URL+"/compliance/v1/export/verify", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Cloison-Export-Manifest", manifest)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var v verdict
		if err := json.NewDecoder(r.Body).Decode(&v); r.StatusCode != 200 || err != nil {
			t.Fatalf("verify a file: %d %v", r.StatusCode, err)
		}
		return v
	}
	if v := verifyFile(pdf, manifest); !v.OK || !strings.Contains(v.Result, "register.pdf") {
		t.Errorf("the PDF as answered: %+v, want verified naming register.pdf", v)
	}
	bad := bytes.Clone(pdf)
	bad[len(bad)/2] ^= 1
	if v := verifyFile(bad, manifest); v.OK {
		t.Errorf("a byte of the PDF altered: %+v, want a failure", v)
	}
	mb, _ := base64.StdEncoding.DecodeString(manifest)
	mb[len(mb)-10] ^= 1 // the signature
	if v := verifyFile(pdf, base64.StdEncoding.EncodeToString(mb)); v.OK {
		t.Errorf("a manifest whose signature was altered: %+v, want a failure", v)
	}
	if code, _, b := call(t, p, "POST", "/compliance/v1/export/verify", admin, "not a zip"); code != 400 {
		t.Errorf("a body that is no ZIP: %d %s, want 400", code, b)
	}
	if code, _, b := call(t, p, "POST", "/compliance/v1/export/verify", admin, string(zipWith(t, map[string]string{"../manifest.txt": "x"}))); code != 400 {
		t.Errorf("an entry outside the folder: %d %s, want 400", code, b)
	}
}

// rezip returns the ZIP b with one byte of its file name flipped.
func rezip(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == name {
			data[len(data)/2] ^= 1
		}
		files[f.Name] = string(data)
	}
	return zipWith(t, files)
}

func zipWith(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
