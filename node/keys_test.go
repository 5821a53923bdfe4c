package node

import (
	"crypto/ed25519"
	"testing"

	"github.com/cloison/cloison/audit"
)

// Keys.Rotate (cloisond --rotate-keys) never rotates the KEK (the sealed signing keys would not
// open), and replaces the log key only while the old one is trusted (its
// checkpoints must keep verifying); the cluster key rotates when asked.
func TestKeyRotationPolicy(t *testing.T) {
	trusted := map[string]ed25519.PublicKey{"aaaaaaaaaaaaaaaa": nil}
	for _, tc := range []struct {
		purpose audit.Name
		rotate  bool
		current string
		want    bool
	}{
		{audit.PurposeKEK, true, "kek-1", false},
		{audit.PurposeKEK, false, "kek-1", false},
		{audit.PurposeCheckpoint, true, "aaaaaaaaaaaaaaaa", true},
		{audit.PurposeCheckpoint, true, "bbbbbbbbbbbbbbbb", false},
		{audit.PurposeCheckpoint, false, "aaaaaaaaaaaaaaaa", false},
		{audit.PurposeCluster, true, "ck-1", true},
		{audit.PurposeCluster, false, "ck-1", false},
	} {
		k := Keys{Rotate: tc.rotate, Trusted: trusted}
		p := k.policy(tc.purpose)
		got := p.Rotate && (p.MayReplace == nil || p.MayReplace(tc.current))
		if got != tc.want {
			t.Errorf("%s rotate=%v current %s: got may replace %v, want %v", tc.purpose, tc.rotate, tc.current, got, tc.want)
		}
	}
}
