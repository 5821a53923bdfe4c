package witness

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

// memTree is an in-memory RFC 6962 tree (tlog stored hashes), the log side
// of the protocol tests.
type memTree struct {
	n      int64
	hashes []tlog.Hash
}

func (m *memTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x < 0 || x >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("no hash %d", x)
		}
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memTree) add(t testing.TB, data string) {
	hs, err := tlog.StoredHashes(m.n, []byte(data), m)
	if err != nil {
		t.Fatal(err)
	}
	m.hashes = append(m.hashes, hs...)
	m.n++
}

func (m *memTree) grow(t testing.TB, to int64, prefix string) {
	for m.n < to {
		m.add(t, fmt.Sprintf("%s-%d", prefix, m.n))
	}
}

func (m *memTree) head(t testing.TB, origin string) audit.TreeHead {
	root, err := tlog.TreeHash(m.n, m)
	if err != nil {
		t.Fatal(err)
	}
	return audit.TreeHead{Origin: audit.Name(origin), Size: uint64(m.n), Root: root}
}

func (m *memTree) proof(_ context.Context, old, n uint64) (tlog.TreeProof, error) {
	return tlog.ProveTree(int64(n), int64(old), m)
}

var (
	logKey     = ed25519.NewKeyFromSeed([]byte("cloison-witness-test-log-key-32b"))
	otherKey   = ed25519.NewKeyFromSeed([]byte("cloison-witness-test-other-key!!"))
	witnessKey = ed25519.NewKeyFromSeed([]byte("cloison-witness-test-witness-key"))
)

const testOrigin = "test.cloison/log"

func signHead(t testing.TB, key ed25519.PrivateKey, h audit.TreeHead) []byte {
	t.Helper()
	s, err := audit.TreeSigner(h.Origin, key)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := audit.SignTreeHead(s, h)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func logVKey(t testing.TB, key ed25519.PrivateKey) string {
	t.Helper()
	v, err := audit.TreeVerifierKey(testOrigin, key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newWitness(t testing.TB, state string) *Witness {
	t.Helper()
	w, err := New(Config{Name: "witness.test/w1", Key: witnessKey, Logs: []string{logVKey(t, logKey)}, StatePath: state,
		Now: func() time.Time { return time.Unix(1_800_000_000, 0) }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func body(old uint64, proof tlog.TreeProof, cp []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "old %d\n", old)
	for _, h := range proof {
		b.WriteString(h.String() + "\n")
	}
	b.WriteString("\n")
	b.Write(cp)
	return b.String()
}

func post(t *testing.T, url, b string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(out)
}

// The C2SP tlog-witness answers, in the order a log meets them: each
// status and body of the spec's "add-checkpoint" section.
func TestAddCheckpointProtocol(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	w := newWitness(t, state)
	srv := httptest.NewServer(w)
	defer srv.Close()

	tree := &memTree{}
	tree.grow(t, 5, "a")
	h5 := tree.head(t, testOrigin)
	cp5 := signHead(t, logKey, h5)
	tree.grow(t, 8, "a")
	h8 := tree.head(t, testOrigin)
	cp8 := signHead(t, logKey, h8)
	p58, _ := tree.proof(context.Background(), 5, 8)

	fork := &memTree{}
	fork.grow(t, 5, "b")
	cp5fork := signHead(t, logKey, fork.head(t, testOrigin))
	fork.grow(t, 8, "b")
	cp8fork := signHead(t, logKey, fork.head(t, testOrigin))
	p58fork, _ := fork.proof(context.Background(), 5, 8)

	other := signHead(t, logKey, audit.TreeHead{Origin: "other.log", Size: 5, Root: h5.Root})
	forged := signHead(t, otherKey, h5)
	tooLong := "old 5\n" + strings.Repeat(h5.Root.String()+"\n", 64) + "\n" + string(cp8)

	steps := []struct {
		name   string
		body   string
		status int
		want   string // body (409) or "" (200: checked as a cosignature)
	}{
		{"no blank line", "old 0\n" + string(cp5[:len(cp5)-2]), 400, ""},
		{"old size with a leading zero", body(0, nil, cp5)[:4] + "05\n\n" + string(cp5), 400, ""},
		{"unknown origin", body(0, nil, other), 404, ""},
		{"signed by another key", body(0, nil, forged), 403, ""},
		{"old size above the checkpoint", body(9, nil, cp8), 400, ""},
		{"proof from size 0", body(0, p58, cp8), 400, ""},
		{"first checkpoint, old 0", body(0, nil, cp5), 200, ""},
		{"old 0 again: conflict names the size", body(0, nil, cp8), 409, "5\n"},
		{"another root at the cosigned size", body(5, nil, cp5fork), 409, "5\n"},
		{"a proof from another tree", body(5, p58fork, cp8fork), 422, ""},
		{"the right proof but the forked checkpoint", body(5, p58, cp8fork), 422, ""},
		{"too many proof lines", tooLong, 400, ""},
		{"the same checkpoint again", body(5, nil, cp5), 200, ""},
		{"consistent extension", body(5, p58, cp8), 200, ""},
		{"stale old size after the extension", body(5, p58, cp8), 409, "8\n"},
	}
	for _, st := range steps {
		status, ctype, got := post(t, srv.URL, st.body)
		if status != st.status {
			t.Fatalf("%s: got HTTP %d (%q), want %d", st.name, status, got, st.status)
		}
		switch status {
		case 409:
			if got != st.want || ctype != "text/x.tlog.size" {
				t.Errorf("%s: got %q (%s), want %q (text/x.tlog.size)", st.name, got, ctype, st.want)
			}
		case 200:
			cp := cp5
			if strings.HasSuffix(st.body, string(cp8)) {
				cp = cp8
			}
			full, err := audit.AddCosignatures(cp, []byte(got))
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if _, cs, err := audit.VerifyCosigned(full, logVKey(t, logKey), []string{w.VerifierKey()}, 1); err != nil ||
				cs[0].Time != time.Unix(1_800_000_000, 0).UTC() {
				t.Errorf("%s: cosignature %q: %v %v", st.name, got, cs, err)
			}
		}
	}
	if got := w.Size(testOrigin); got != 8 {
		t.Fatalf("got size %d, want 8", got)
	}
	// The state survives a restart: the restarted witness still refuses
	// the fork and knows size 8.
	w2 := newWitness(t, state)
	if got := w2.Size(testOrigin); got != 8 {
		t.Fatalf("after restart: got size %d, want 8", got)
	}
	var ce *ConflictError
	if _, err := w2.AddCheckpoint([]byte(body(5, p58fork, cp8fork))); !errors.As(err, &ce) || ce.Size != 8 {
		t.Fatalf("after restart: got %v, want a conflict at 8", err)
	}
	// A state file that does not parse stops the witness from starting:
	// it never starts over from nothing with the same key.
	if err := os.WriteFile(state, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Name: "witness.test/w1", Key: witnessKey, Logs: []string{logVKey(t, logKey)}, StatePath: state}); err == nil {
		t.Fatal("got a witness from a corrupt state file")
	}
}

// Verified by a third party that trusts only golang.org/x/mod/sumdb/note
// and the witness's vkey: the cosigned checkpoint opens with a note
// verifier built from audit.NewCosignatureVerifier.
func TestCosignatureOpensWithNote(t *testing.T) {
	w := newWitness(t, filepath.Join(t.TempDir(), "s"))
	tree := &memTree{}
	tree.grow(t, 3, "x")
	cp := signHead(t, logKey, tree.head(t, testOrigin))
	lines, err := w.AddCheckpoint([]byte(body(0, nil, cp)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := audit.NewCosignatureVerifier(w.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(append(append([]byte(nil), cp...), lines...), note.VerifierList(v))
	if err != nil || len(n.Sigs) != 1 || n.Sigs[0].Name != "witness.test/w1" {
		t.Fatalf("note.Open: %v %+v", err, n)
	}
}

// Concurrent submissions of growing checkpoints never move the witness
// backwards: the state check and write are one step.
func TestConcurrentSubmissionsNeverRollBack(t *testing.T) {
	w := newWitness(t, filepath.Join(t.TempDir(), "s"))
	srv := httptest.NewServer(w)
	defer srv.Close()
	tree := &memTree{}
	tree.grow(t, 64, "c")
	var cps [][]byte
	var heads []audit.TreeHead
	for n := int64(1); n <= 64; n++ {
		root, _ := tlog.TreeHash(n, tree)
		h := audit.TreeHead{Origin: testOrigin, Size: uint64(n), Root: root}
		heads = append(heads, h)
		cps = append(cps, signHead(t, logKey, h))
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := NewClient(srv.URL, w.VerifierKey(), 0, nil)
			if err != nil {
				t.Error(err)
				return
			}
			for i := g; i < 64; i += 8 {
				_, err := c.Submit(context.Background(), cps[i], heads[i], tree.proof)
				var re *RefusedError
				if err != nil && !(errors.As(err, &re) && re.Reason == ReasonSmaller) {
					t.Errorf("size %d: %v", i+1, err)
				}
			}
		}()
	}
	wg.Wait()
	if got := w.Size(testOrigin); got != 64 {
		t.Fatalf("got size %d, want 64", got)
	}
}

func FuzzAddCheckpoint(f *testing.F) {
	tree := &memTree{}
	tree.grow(f, 5, "f")
	cp := signHead(f, logKey, tree.head(f, testOrigin))
	f.Add([]byte(body(0, nil, cp)))
	f.Add([]byte("old 3\n" + tree.head(f, testOrigin).Root.String() + "\n\n" + string(cp)))
	f.Add([]byte("old \n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w := newWitness(t, filepath.Join(t.TempDir(), "s"))
		lines, err := w.AddCheckpoint(b)
		if err != nil {
			if StatusOf(err) == http.StatusInternalServerError {
				t.Fatalf("internal error on input: %v", err)
			}
			return
		}
		// Whatever was cosigned is a correctly signed checkpoint of the
		// known log, and the cosignature verifies on it.
		_, n, _ := strings.Cut(string(b), "\n\n")
		full, err := audit.AddCosignatures([]byte(n), lines)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := audit.CheckCosignatures(full, []string{w.VerifierKey()}, 1); err != nil {
			t.Fatalf("cosigned %q: %v", b, err)
		}
		if _, err := note.Open([]byte(n), note.VerifierList(mustVerifier(t, logVKey(t, logKey)))); err != nil {
			t.Fatalf("cosigned a checkpoint the log did not sign: %v", err)
		}
	})
}

func mustVerifier(t testing.TB, vkey string) note.Verifier {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
