package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
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

// --kv-type (or CLOISON_KV_TYPE, or "kv-type" in the --config file) takes
// f32 or f16, any case; anything else fails the start, naming the flag
// or the variable.
// Unset, the arena stores float32. The node's capacity carries it (the
// arena's element type and the attested one).
func TestKVTypeFlag(t *testing.T) {
	base := []string{"--database-url", "postgres://x", "--dev"}
	for _, c := range []struct {
		args []string
		env  string
		want kernels.KVType
		ok   bool
	}{
		{nil, "", kernels.KVF32, true},
		{[]string{"--kv-type", "f16"}, "", kernels.KVF16, true},
		{[]string{"--kv-type", "F32"}, "", kernels.KVF32, true},
		{nil, "f16", kernels.KVF16, true},
		{[]string{"--kv-type", "f32"}, "f16", kernels.KVF32, true}, // the flag beats the environment
		{[]string{"--kv-type", "q8_0"}, "", 0, false},
		{[]string{"--kv-type", ""}, "", 0, false},
		{nil, "bf16", 0, false},
	} {
		t.Run(strings.Join(c.args, " ")+" env="+c.env, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("CLOISON_KV_TYPE", c.env)
			}
			cfg, err := parseFlags(append(slices.Clone(base), c.args...))
			if (err == nil) != c.ok {
				t.Fatalf("got %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				name := "kv-type"
				if c.args == nil {
					name = "CLOISON_KV_TYPE" // the variable as it is spelt
				}
				if !strings.Contains(err.Error(), name) {
					t.Fatalf("error %q does not name %s", err, name)
				}
				return
			}
			if cfg.kvType != c.want || cfg.capacity(isolation.ZeroAlways).KV != c.want {
				t.Fatalf("kv type %v (capacity %v), want %v", cfg.kvType, cfg.capacity(isolation.ZeroAlways).KV, c.want)
			}
		})
	}
	file := filepath.Join(t.TempDir(), "cloisond.json")
	os.WriteFile(file, []byte(`{"kv-type": "f16"}`), 0o600)
	if cfg, err := parseFlags(append([]string{"--config", file}, base...)); err != nil || cfg.kvType != kernels.KVF16 {
		t.Fatalf("config file: got %v, %v", cfg.kvType, err)
	}
}
