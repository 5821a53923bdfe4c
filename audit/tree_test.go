package audit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
	"pgregory.net/rapid"
)

var treeTestKey = ed25519.NewKeyFromSeed([]byte("cloison-audit-tree-test-key-0001"))

// memTree is an in-memory tlog store of n records.
type memTree struct {
	hashes []tlog.Hash
	recs   []Record
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

func buildTree(t testing.TB, n int) *memTree {
	m := &memTree{}
	for i := 0; i < n; i++ {
		r := Record{Seq: uint64(i + 1), Payload: fmt.Appendf(nil, `{"n":%d}`, i)}
		hs, err := tlog.StoredHashes(int64(i), r.Payload, m)
		if err != nil {
			t.Fatal(err)
		}
		m.hashes = append(m.hashes, hs...)
		m.recs = append(m.recs, r)
	}
	return m
}

func (m *memTree) note(t testing.TB, size int) []byte {
	root, err := tlog.TreeHash(int64(size), m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := TreeSigner("tree-test", treeTestKey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := SignTreeHead(s, TreeHead{Origin: "tree-test", Size: uint64(size), Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func treeVKey(t testing.TB) string {
	v, err := TreeVerifierKey("tree-test", treeTestKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Property: for random sizes, every inclusion and consistency proof the
// tree serves verifies, and a changed record or root does not.
func TestTreeProofsVerifyForRandomSizes(t *testing.T) {
	full := buildTree(t, 300)
	vkey := treeVKey(t)
	rapid.Check(t, func(rt *rapid.T) {
		newSize := rapid.IntRange(1, 300).Draw(rt, "new")
		oldSize := rapid.IntRange(1, newSize).Draw(rt, "old")
		seq := rapid.IntRange(1, newSize).Draw(rt, "seq")
		newer, older := full.note(t, newSize), full.note(t, oldSize)
		rp, err := tlog.ProveRecord(int64(newSize), int64(seq-1), full)
		if err != nil {
			rt.Fatal(err)
		}
		if _, err := VerifyInclusion(newer, vkey, full.recs[seq-1], rp); err != nil {
			rt.Fatalf("inclusion of %d in %d: got %v, want nil", seq, newSize, err)
		}
		wrong := full.recs[seq-1]
		wrong.Payload = []byte(`{"n":"forged"}`)
		if _, err := VerifyInclusion(newer, vkey, wrong, rp); !errors.Is(err, ErrNotIncluded) {
			rt.Fatalf("forged record: got %v, want ErrNotIncluded", err)
		}
		tp, err := tlog.ProveTree(int64(newSize), int64(oldSize), full)
		if err != nil {
			rt.Fatal(err)
		}
		if _, err := VerifyConsistency(vkey, older, newer, tp); err != nil {
			rt.Fatalf("consistency %d -> %d: got %v, want nil", oldSize, newSize, err)
		}
		if oldSize < newSize {
			if _, err := VerifyConsistency(vkey, newer, older, tp); !errors.Is(err, ErrSmallerTree) {
				rt.Fatalf("consistency %d -> %d: got %v, want ErrSmallerTree", newSize, oldSize, err)
			}
		}
	})
}

func TestTreeVerificationRefusals(t *testing.T) {
	full := buildTree(t, 20)
	vkey := treeVKey(t)
	n10, n20 := full.note(t, 10), full.note(t, 20)
	fork := buildTree(t, 20)
	fork.recs[3].Payload = []byte(`{"n":"fork"}`)
	fork.hashes = nil
	for i, r := range fork.recs {
		hs, _ := tlog.StoredHashes(int64(i), r.Payload, fork)
		fork.hashes = append(fork.hashes, hs...)
	}
	f20 := fork.note(t, 20)
	p1020, _ := tlog.ProveTree(20, 10, full)
	fp, _ := tlog.ProveTree(20, 10, fork)
	otherKey := ed25519.NewKeyFromSeed([]byte("cloison-audit-tree-test-key-0002"))
	otherSigner, _ := TreeSigner("tree-test", otherKey)
	root, _ := tlog.TreeHash(20, full)
	bySomeoneElse, _ := SignTreeHead(otherSigner, TreeHead{Origin: "tree-test", Size: 20, Root: root})
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"missing trusted", func() error { _, err := VerifyConsistency(vkey, nil, n20, p1020); return err }(), ErrNoCheckpoint},
		{"missing newer", func() error { _, err := VerifyConsistency(vkey, n10, []byte(""), p1020); return err }(), ErrNoCheckpoint},
		{"smaller tree", func() error { _, err := VerifyConsistency(vkey, n20, n10, nil); return err }(), ErrSmallerTree},
		{"same size, other root", func() error { _, err := VerifyConsistency(vkey, n20, f20, nil); return err }(), ErrFork},
		{"fork after the trusted size", func() error { _, err := VerifyConsistency(vkey, n10, f20, fp); return err }(), ErrFork},
		{"another key", func() error { _, err := VerifyConsistency(vkey, n10, bySomeoneElse, p1020); return err }(), ErrBadSignature},
		{"empty tree", func() error {
			_, err := ParseTreeHead("tree-test\n0\n"+"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n", "tree-test")
			return err
		}(), ErrEmptyLedger},
		{"entry beyond the tree", func() error {
			_, err := VerifyInclusion(n10, vkey, full.recs[14], nil)
			return err
		}(), ErrNotIncluded},
		{"no checkpoint for inclusion", func() error { _, err := VerifyInclusion(nil, vkey, full.recs[1], nil); return err }(), ErrNoCheckpoint},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := SignTreeHead(otherSigner, TreeHead{Origin: "tree-test"}); !errors.Is(err, ErrEmptyLedger) {
		t.Errorf("signing an empty tree: got %v, want ErrEmptyLedger", err)
	}
	if _, err := TreeSigner("a+b", treeTestKey); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("origin with '+': got %v, want ErrInvalidEvent", err)
	}
}
