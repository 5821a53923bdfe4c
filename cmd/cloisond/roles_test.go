package main

import (
	"strings"
	"testing"
)

// --role defaults to both (no TLS needed); prefill and decode need the TLS
// files, decode needs peers; unknown roles are refused.
func TestRoleFlags(t *testing.T) {
	db := []string{"--database-url", "postgres://x", "--dev"}
	c, err := parseFlags(db)
	if err != nil || c.roles.role != roleBoth {
		t.Fatalf("default: %q %v", c.roles.role, err)
	}
	tlsFlags := []string{"--tls-ca", "ca.pem", "--tls-cert", "n.pem", "--tls-key", "n-key.pem"}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--role", "primary"}, "want both, decode or prefill"},
		{[]string{"--role", "prefill"}, "--tls-ca"},
		{[]string{"--role", "decode", "--prefill-peers", "a:1"}, "--tls-ca"},
		{append([]string{"--role", "decode"}, tlsFlags...), "--prefill-peers"},
		{append([]string{"--role", "decode", "--prefill-peers", " a:1, b:2 ,"}, tlsFlags...), ""},
		{append([]string{"--role", "prefill"}, tlsFlags...), ""},
	} {
		c, err := parseFlags(append(append([]string{}, db...), tc.args...))
		if tc.err == "" {
			if err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Fatalf("%v: got %v, want an error naming %s", tc.args, err, tc.err)
		}
		_ = c
	}
	c, _ = parseFlags(append(append([]string{}, db...), append([]string{"--role", "decode", "--prefill-peers", " a:1, b:2 ,"}, tlsFlags...)...))
	if p := c.roles.peers(); len(p) != 2 || p[0] != "a:1" || p[1] != "b:2" {
		t.Fatalf("peers %q", p)
	}
}
