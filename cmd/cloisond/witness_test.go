package main

import (
	"crypto/ed25519"
	"testing"

	"github.com/cloison/cloison/audit"
)

// --witness takes URL=VKEY, with a cosignature vkey and an http(s) URL;
// anything else is refused at start, never ignored.
func TestWitnessFlag(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	vkey, err := audit.CosignerVerifierKey("w.test/1", key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	logKey, _ := audit.TreeVerifierKey("log", key.Public().(ed25519.PublicKey))
	for _, tt := range []struct {
		spec string
		ok   bool
	}{
		{"http://127.0.0.1:7380=" + vkey, true},
		{"https://w.example/sub=" + vkey, true},
		{"http://127.0.0.1:7380", false},
		{"=" + vkey, false},
		{"ftp://w.example=" + vkey, false},
		{"http://w.example=" + logKey, false},             // a log key, not a cosignature key
		{"http://w.example=" + vkey[:len(vkey)-4], false}, // a truncated key
	} {
		c, err := parseFlags([]string{"--dev", "--database-url", "postgres://x", "--witness", tt.spec})
		if (err == nil) != tt.ok {
			t.Errorf("--witness %q: got %v, want ok=%v", tt.spec, err, tt.ok)
		}
		if err == nil && (len(c.witness.specs) != 1 || c.witness.specs[0] != tt.spec) {
			t.Errorf("--witness %q: got %v", tt.spec, c.witness.specs)
		}
	}
}
