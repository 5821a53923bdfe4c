package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/audit"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "cloisond.json")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Every kind of flag takes its own JSON type from the file: large integers
// (a float64 round trip used to print 1.048576e+06, which the int flag
// refused), bools, durations, comma-list flags as lists, and repeatable flags
// as lists, each item one --flag.
func TestConfigFileTypedValues(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	vkey, err := audit.CosignerVerifierKey("w.test/1", key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := "http://127.0.0.1:7380="+vkey, "https://w.example/sub="+vkey
	body, _ := json.Marshal(map[string]any{
		"kv-pages": json.Number("1048576"), "max-request-bytes": json.Number("9007199254740993"),
		"prefix-cache": false, "shutdown-grace": "45s", "prefill-peers": []string{"127.0.0.1:7001", "127.0.0.1:7002"},
		"witness": []string{w1, w2}, "decode-peers": "127.0.0.1:1,127.0.0.1:2",
	})
	c, err := parseFlags([]string{"--config", writeConfig(t, string(body)), "--database-url", "postgres://x", "--dev"})
	if err != nil {
		t.Fatal(err)
	}
	if c.kvPages != 1048576 || c.maxRequestBytes != 9007199254740993 || c.prefixCache || c.shutdownGrace != 45*time.Second {
		t.Errorf("kv-pages %d max-request-bytes %d prefix-cache %v shutdown-grace %v", c.kvPages, c.maxRequestBytes, c.prefixCache, c.shutdownGrace)
	}
	if got := c.roles.peers(); !slices.Equal(got, []string{"127.0.0.1:7001", "127.0.0.1:7002"}) {
		t.Errorf("prefill-peers: %v", got)
	}
	if c.roles.decodePeers != "127.0.0.1:1,127.0.0.1:2" {
		t.Errorf("decode-peers: %q", c.roles.decodePeers)
	}
	if !slices.Equal(c.witness.specs, []string{w1, w2}) {
		t.Errorf("witness: %v", c.witness.specs)
	}
	// A flag beats the file, the repeatable one included.
	c, err = parseFlags([]string{"--config", writeConfig(t, string(body)), "--database-url", "postgres://x", "--dev",
		"--kv-pages", "7", "--witness", w2})
	if err != nil {
		t.Fatal(err)
	}
	if c.kvPages != 7 || !slices.Equal(c.witness.specs, []string{w2}) {
		t.Errorf("flags over file: kv-pages %d witness %v", c.kvPages, c.witness.specs)
	}
}

// A value of the wrong type, an unknown key, or not an object fails the start
// with an error naming the file and the key.
func TestConfigFileRefusals(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"kv-pagez": 1}`, `unknown setting "kv-pagez"`},
		{`{"config": "other.json"}`, `unknown setting "config"`},
		{`{"kv-pages": "4096"}`, `setting "kv-pages": want a JSON integer, got string`},
		{`{"kv-pages": 1.5}`, `setting "kv-pages": want an integer, got 1.5`},
		{`{"kv-pages": 99999999999999999999}`, `setting "kv-pages"`},
		{`{"prefix-cache": "false"}`, `setting "prefix-cache": want a JSON bool, got string`},
		{`{"shutdown-grace": 30}`, `setting "shutdown-grace": want a duration string`},
		{`{"shutdown-grace": "soon"}`, `setting "shutdown-grace"`},
		{`{"addr": 8080}`, `setting "addr": want a JSON string, got number`},
		{`{"addr": null}`, `setting "addr": want a JSON string, got null`},
		{`{"witness": [1]}`, `setting "witness": item 0: want a string, got number`},
		{`{"witness": {"a": 1}}`, `setting "witness": want a JSON list of strings (repeatable), got object`},
		{`{"witness": ["nope"]}`, `setting "witness"`},
		{`[1]`, `cannot unmarshal`},
		{`null`, `want a JSON object`},
		{`{"addr": "a"} {}`, `trailing data`},
	} {
		file := writeConfig(t, tt.body)
		_, err := parseFlags([]string{"--config", file, "--database-url", "postgres://x", "--dev"})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: got %v, want an error with %q and the file name", tt.body, err, tt.want)
		}
	}
}

// Every flag has a kind in the reference, and a file value of that kind sets
// it: the reference's types are the parser's.
func TestConfigReferenceKinds(t *testing.T) {
	var buf bytes.Buffer
	if err := configReference(&buf); err != nil {
		t.Fatal(err)
	}
	for name := range repeatable {
		if !strings.Contains(buf.String(), "| `"+name+"` | list of strings (repeatable) |") {
			t.Errorf("%s is not listed as repeatable", name)
		}
	}
	for name := range commaLists {
		if !strings.Contains(buf.String(), "| `"+name+"` | list of strings |") {
			t.Errorf("%s is not listed as a list", name)
		}
	}
}

// The committed CONFIG.md is what the flag definitions generate; run
// make config-doc after changing a flag.
func TestConfigReference(t *testing.T) {
	var buf bytes.Buffer
	if err := configReference(&buf); err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, buf.Bytes()) {
		t.Fatal("cmd/cloisond/CONFIG.md is stale: run make config-doc")
	}
}

// The external identity provider's flags: a JWKS URL needs an issuer, must
// be https (http only to loopback), and the other flags need the URL.
func TestIdPFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--jwks-url", "https://idp.example/jwks", "--jwt-issuer", "https://idp.example"}, true},
		{[]string{"--jwks-url", "http://127.0.0.1:8081/jwks", "--jwt-issuer", "i", "--jwt-audience", "a", "--jwks-tenant-claim", "org"}, true},
		{[]string{"--jwks-url", "https://idp.example/jwks"}, false},
		{[]string{"--jwks-url", "http://idp.example/jwks", "--jwt-issuer", "i"}, false},
		{[]string{"--jwt-issuer", "i"}, false},
		{[]string{"--jwks-url", "https://idp.example/jwks", "--jwt-issuer", "i", "--jwks-refresh-limit", "0s"}, false},
		{[]string{"--jwks-url", "https://idp.example/jwks", "--jwt-issuer", "i", "--jwks-tenant-claim", "scope"}, false},
	} {
		c, err := parseFlags(append([]string{"--database-url", "postgres://x", "--dev"}, tt.args...))
		if (err == nil) != tt.ok {
			t.Errorf("%v: %v, want ok %v", tt.args, err, tt.ok)
		}
		if err == nil && len(tt.args) > 6 && c.idp.tenantClaim != "org" {
			t.Errorf("%v: tenant claim %q", tt.args, c.idp.tenantClaim)
		}
	}
}
