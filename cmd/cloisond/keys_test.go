package main

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Outside --dev a start without key files is refused at configuration,
// naming every missing flag (no node silently creates its own secrets); --dev and complete key files start.
func TestProductionNeedsKeyFiles(t *testing.T) {
	db := []string{"--database-url", "postgres://x"}
	tlsFlags := []string{"--tls-ca", "ca.pem", "--tls-cert", "n.pem", "--tls-key", "n-key.pem"}
	files := []string{"--kek-file", "/run/secrets/kek", "--log-key-file", "/run/secrets/log.key"}
	for _, tc := range []struct {
		name    string
		args    []string
		missing []string // empty: accepted
	}{
		{"both, no files", nil, []string{"--kek-file", "--log-key-file"}},
		{"both, kek only", []string{"--kek-file", "k"}, []string{"--log-key-file"}},
		{"both, files", files, nil},
		{"both, dev", []string{"--dev"}, nil},
		{"decode, files but no cluster key", append(append([]string{"--role", "decode", "--prefill-peers", "a:1"}, tlsFlags...), files...), []string{"--cluster-key"}},
		{"decode, all", append(append([]string{"--role", "decode", "--prefill-peers", "a:1", "--cluster-key", "ck"}, tlsFlags...), files...), nil},
		{"prefill needs only the cluster key", append([]string{"--role", "prefill"}, tlsFlags...), []string{"--cluster-key"}},
		{"prefill, cluster key", append([]string{"--role", "prefill", "--cluster-key", "ck"}, tlsFlags...), nil},
		{"decode, dev", append([]string{"--role", "decode", "--prefill-peers", "a:1", "--dev"}, tlsFlags...), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CLOISON_DEV", "") // restored after the test
			os.Unsetenv("CLOISON_DEV")
			_, err := parseFlags(append(append([]string{}, db...), tc.args...))
			if len(tc.missing) == 0 {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				return
			}
			if !errors.Is(err, ErrMissingSecret) {
				t.Fatalf("got %v, want ErrMissingSecret", err)
			}
			for _, m := range tc.missing {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("got %q, want it to name %s", err, m)
				}
			}
		})
	}
}
