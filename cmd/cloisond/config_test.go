package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Flags beat CLOISON_* environment variables, which beat the --config file.
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cloisond.json")
	os.WriteFile(file, []byte(`{"kv-pages": 111, "zeroing": "always", "node": "from-file", "addr": "127.0.0.1:1"}`), 0o600)
	t.Setenv("CLOISON_NODE", "from-env")
	t.Setenv("CLOISON_ADDR", "127.0.0.1:2")
	c, err := parseFlags([]string{"--config", file, "--database-url", "postgres://x", "--addr", "127.0.0.1:3", "--dev"})
	if err != nil {
		t.Fatal(err)
	}
	if c.kvPages != 111 || c.zeroing != "always" || c.node != "from-env" || c.addr != "127.0.0.1:3" {
		t.Fatalf("got kv-pages %d zeroing %s node %s addr %s", c.kvPages, c.zeroing, c.node, c.addr)
	}
	os.WriteFile(file, []byte(`{"kv-pagez": 1}`), 0o600)
	if _, err := parseFlags([]string{"--config", file, "--database-url", "postgres://x"}); err == nil || !strings.Contains(err.Error(), "unknown setting") {
		t.Fatalf("unknown setting: got %v", err)
	}
	t.Setenv("DATABASE_URL", "")
	if _, err := parseFlags(nil); err == nil {
		t.Fatal("no database: no error")
	}
}

// --register-regime takes private or public (the act cited in exports);
// anything else fails the start. Unset, the register is private-sector.
func TestRegisterRegimeFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		ok   bool
	}{
		{nil, "private", true},
		{[]string{"--register-regime", "public"}, "public", true},
		{[]string{"--register-regime", "private"}, "private", true},
		{[]string{"--register-regime", "federal"}, "", false},
		{[]string{"--register-regime", ""}, "", false},
	} {
		cfg, err := parseFlags(append([]string{"--database-url", "postgres://x", "--dev"}, c.args...))
		if (err == nil) != c.ok || c.ok && cfg.registerRegime.String() != c.want {
			t.Errorf("%v: got %q, %v; want %q, ok %v", c.args, cfg.registerRegime, err, c.want, c.ok)
		}
	}
}
