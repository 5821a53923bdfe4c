package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"pgregory.net/rapid"
)

func cosignTestHead(t testing.TB) ([]byte, string) {
	key := ed25519.NewKeyFromSeed([]byte("cloison-cosignature-test-log-key"))
	s, err := TreeSigner("cosign.test/log", key)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := SignTreeHead(s, TreeHead{Origin: "cosign.test/log", Size: 42, Root: tlog.RecordHash([]byte("x"))})
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := TreeVerifierKey("cosign.test/log", key.Public().(ed25519.PublicKey))
	return msg, vkey
}

func cosign(t testing.TB, msg []byte, name string, seed byte, at time.Time) ([]byte, string) {
	key := ed25519.NewKeyFromSeed([]byte(strings.Repeat(string(rune('a'+seed%26)), 32)))
	s, err := NewCosigner(name, key, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(msg, note.VerifierList(mustNoteVerifier(t, msg)))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := note.Sign(&note.Note{Text: n.Text}, s)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(string(signed), "\n\n")
	vkey, _ := CosignerVerifierKey(name, key.Public().(ed25519.PublicKey))
	return signed[i+2:], vkey
}

func mustNoteVerifier(t testing.TB, _ []byte) note.Verifier {
	_, vkey := cosignTestHead(t)
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The cosignature/v1 format of C2SP tlog-cosignature, byte for byte: key
// hash SHA-256(name ‖ "\n" ‖ 0x04 ‖ key)[:4], then the big-endian
// timestamp, then an Ed25519 signature over "cosignature/v1\ntime T\n" and
// the checkpoint body.
func TestCosignatureWireFormat(t *testing.T) {
	msg, _ := cosignTestHead(t)
	at := time.Unix(1679315147, 0)
	line, vkey := cosign(t, msg, "witness.example.com/w1", 1, at)
	key := ed25519.NewKeyFromSeed([]byte(strings.Repeat("b", 32)))
	pub := key.Public().(ed25519.PublicKey)
	rest, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\n"), "— witness.example.com/w1 ")
	if !ok {
		t.Fatalf("line %q", line)
	}
	sig, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(sig) != 4+8+64 {
		t.Fatalf("signature of %d bytes: %v", len(sig), err)
	}
	h := sha256.Sum256(append([]byte("witness.example.com/w1\n\x04"), pub...))
	if string(sig[:4]) != string(h[:4]) {
		t.Errorf("key hash %x, want %x", sig[:4], h[:4])
	}
	if got := binary.BigEndian.Uint64(sig[4:12]); got != 1679315147 {
		t.Errorf("timestamp %d", got)
	}
	body := string(msg[:strings.Index(string(msg), "\n\n")+1])
	if !ed25519.Verify(pub, []byte("cosignature/v1\ntime 1679315147\n"+body), sig[12:]) {
		t.Error("signature is not over cosignature/v1, time and the body")
	}
	if !strings.HasPrefix(vkey, "witness.example.com/w1+"+base64Hex(h[:4])+"+") {
		t.Errorf("vkey %q", vkey)
	}
	if v, err := NewCosignatureVerifier(vkey); err != nil || v.Name() != "witness.example.com/w1" {
		t.Errorf("vkey %q: %v", vkey, err)
	}
	parts := strings.SplitN(vkey, "+", 3)
	if _, err := NewCosignatureVerifier(parts[0] + "+00000000+" + parts[2]); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a vkey with a wrong hash: got %v", err)
	}
	// A log's Ed25519 note key (type 0x01) is not a cosignature key.
	if _, err := NewCosignatureVerifier(mustLogVKey(t)); !errors.Is(err, ErrBadSignature) {
		t.Errorf("got %v, want ErrBadSignature for a 0x01 key", err)
	}
}

func base64Hex(b []byte) string {
	const hexd = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, hexd[c>>4], hexd[c&15])
	}
	return string(out)
}

func mustLogVKey(t testing.TB) string {
	_, v := cosignTestHead(t)
	return v
}

// k of n, for every subset of four witnesses that signed and every k:
// VerifyCosigned succeeds exactly when at least k trusted witnesses
// signed, whatever untrusted, repeated or broken lines are added.
func TestVerifyCosignedKOfN(t *testing.T) {
	msg, logKey := cosignTestHead(t)
	names := []string{"w.test/a", "w.test/b", "w.test/c", "w.test/d"}
	lines := make([][]byte, 4)
	vkeys := make([]string, 4)
	for i, n := range names {
		lines[i], vkeys[i] = cosign(t, msg, n, byte(i), time.Unix(1_700_000_000, 0))
	}
	stranger, _ := cosign(t, msg, "w.test/stranger", 9, time.Unix(1_700_000_000, 0))
	rapid.Check(t, func(rt *rapid.T) {
		signed := rapid.SliceOfNDistinct(rapid.IntRange(0, 3), 0, 4, rapid.ID[int]).Draw(rt, "signed")
		trusted := rapid.SliceOfNDistinct(rapid.IntRange(0, 3), 1, 4, rapid.ID[int]).Draw(rt, "trusted")
		k := rapid.IntRange(0, len(trusted)).Draw(rt, "k")
		full := append([]byte(nil), msg...)
		for _, i := range signed {
			var err error
			if full, err = AddCosignatures(full, lines[i]); err != nil {
				rt.Fatal(err)
			}
			if rapid.Bool().Draw(rt, "repeat") {
				full = append(full, lines[i]...) // the same line twice counts once
			}
		}
		if rapid.Bool().Draw(rt, "stranger") {
			full = append(full, stranger...)
		}
		var keys []string
		want := 0
		for _, i := range trusted {
			keys = append(keys, vkeys[i])
			for _, s := range signed {
				if s == i {
					want++
				}
			}
		}
		if rapid.Bool().Draw(rt, "list a key twice") {
			keys = append(keys, keys[0])
		}
		_, got, err := VerifyCosigned(full, logKey, keys, k)
		if len(got) != want {
			rt.Fatalf("got %d valid cosignatures, want %d", len(got), want)
		}
		if (want >= k) != (err == nil) || (err != nil && !errors.Is(err, ErrTooFewCosignatures)) {
			rt.Fatalf("want %d of k=%d: got %v", want, k, err)
		}
	})
	// A cosignature on another checkpoint does not count on this one.
	other, _ := SignTreeHead(mustSigner(t), TreeHead{Origin: "cosign.test/log", Size: 43, Root: tlog.RecordHash([]byte("y"))})
	full, _ := AddCosignatures(other, lines[0])
	if _, _, err := VerifyCosigned(full, logKey, vkeys[:1], 1); !errors.Is(err, ErrTooFewCosignatures) {
		t.Fatalf("a cosignature moved to another checkpoint: got %v", err)
	}
}

func mustSigner(t testing.TB) note.Signer {
	key := ed25519.NewKeyFromSeed([]byte("cloison-cosignature-test-log-key"))
	s, err := TreeSigner("cosign.test/log", key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
