package main

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --report-webhook-secret-file: "whsec_" base64 as Standard Webhooks
// libraries write it, or raw bytes; short, malformed, group-readable and
// missing secrets are refused, and a webhook without one does not start.
func TestReportWebhookSecretFile(t *testing.T) {
	raw := []byte("0123456789abcdef0123")
	dir := t.TempDir()
	cases := []struct {
		name, content string
		mode          os.FileMode
		want          []byte
		err           string
	}{
		{"raw", string(raw) + "\n", 0o600, raw, ""},
		{"whsec", "whsec_" + base64.StdEncoding.EncodeToString(raw), 0o400, raw, ""},
		{"short", "abc", 0o600, nil, "shorter than 16"},
		{"bad base64", "whsec_%%%", 0o600, nil, "not base64"},
		{"readable by group", string(raw), 0o640, nil, ""},
	}
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(path, []byte(c.content), c.mode); err != nil {
			t.Fatal(err)
		}
		got, err := readWebhookSecret(path)
		switch {
		case c.want != nil && (err != nil || !bytes.Equal(got, c.want)):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		case c.want == nil && err == nil:
			t.Errorf("%s: accepted", c.name)
		case c.err != "" && err != nil && !strings.Contains(err.Error(), c.err):
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
	if _, err := readWebhookSecret(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
	r := responsesConfig{webhook: "https://ops.example/hook"}
	if _, err := r.webhookSecret(); err == nil || !strings.Contains(err.Error(), "--report-webhook-secret-file") {
		t.Errorf("webhook without a secret: %v", err)
	}
}
