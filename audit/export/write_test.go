package export

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// memSource is a ledger held in memory, read as Write reads a store.
type memSource struct {
	t      testing.TB
	origin audit.Name
	key    ed25519.PrivateKey
	recs   []audit.Record
	tree   audit.MemTree
	short  bool // Scan stops one entry early
}

func newMemSource(t testing.TB, key ed25519.PrivateKey, n int) *memSource {
	src := &memSource{t: t, origin: "mem-ledger", key: key}
	for i := 1; i <= n; i++ {
		src.append(audit.Event{OccurredAt: t0.Add(time.Duration(i) * time.Second), Tenant: "alpha", Actor: "engine:t",
			Payload: audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("req-%d", i)), Model: "m",
				PromptTokens: int64(i), CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}})
	}
	return src
}

func (m *memSource) append(e audit.Event) audit.Record {
	var h audit.Head
	if len(m.recs) > 0 {
		h = m.recs[len(m.recs)-1].Head()
	}
	r, err := h.Next(e)
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := m.tree.Append(r.Payload); err != nil {
		m.t.Fatal(err)
	}
	m.recs = append(m.recs, r)
	return r
}

func (m *memSource) Sync(context.Context) error { return nil }

func (m *memSource) Snapshot(_ context.Context, from, to uint64) (Snapshot, error) {
	s := Snapshot{Origin: m.origin, From: max(from, 1), To: to}
	if s.To == 0 || s.To > uint64(len(m.recs)) {
		s.To = uint64(len(m.recs))
	}
	if s.To < s.From {
		return Snapshot{}, audit.ErrEmptyLedger
	}
	if s.From > 1 {
		s.Prev = m.recs[s.From-2].Hash
		levels, indexes := PrefixSubtrees(s.From - 1)
		stored := make([]int64, len(levels))
		for i := range levels {
			stored[i] = tlog.StoredHashIndex(levels[i], indexes[i])
		}
		var err error
		if s.Prefix, err = m.tree.ReadHashes(stored); err != nil {
			return Snapshot{}, err
		}
	}
	s.Head = m.recs[s.To-1].Hash
	var err error
	s.Tree, err = m.tree.Head(m.origin, s.To)
	return s, err
}

func (m *memSource) TreeNote(_ context.Context, h audit.TreeHead) ([]byte, error) {
	signer, err := audit.TreeSigner(m.origin, m.key)
	if err != nil {
		return nil, err
	}
	return audit.SignTreeHead(signer, h)
}

func (m *memSource) Scan(_ context.Context, from, to uint64, fn func(audit.Record) error) error {
	if m.short {
		to--
	}
	for _, r := range m.recs[from-1 : to] {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (m *memSource) Append(_ context.Context, e audit.Event) (audit.Record, error) {
	return m.append(e), nil
}

// Write's export of a ledger held in memory verifies offline, from the
// first entry and from the middle (with the tree prefix), and is recorded
// in the ledger it exports.
func TestWriteVerifiesOffline(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	for _, tc := range []struct {
		name     string
		from, to uint64
	}{{"whole", 0, 0}, {"middle", 4, 9}} {
		t.Run(tc.name, func(t *testing.T) {
			src := newMemSource(t, key, 11)
			dir := filepath.Join(t.TempDir(), "export")
			m, err := Write(context.Background(), src, Options{Dir: dir, From: tc.from, To: tc.to, Key: key})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := VerifyDir(dir, audit.KeySet(pub), audit.KeySet(pub))
			if err != nil {
				t.Fatal(err)
			}
			if rep.Manifest.From != m.From || rep.Manifest.To != m.To || rep.Tree.Size != m.To {
				t.Errorf("got range %d..%d (tree %d), want %d..%d", rep.Manifest.From, rep.Manifest.To, rep.Tree.Size, m.From, m.To)
			}
			last := src.recs[len(src.recs)-1]
			if len(src.recs) != 12 || last.Kind != audit.KindExportCreated || last.Actor != "cloisonctl" {
				t.Errorf("got %d entries, the last %s by %s; want 12, export.created by cloisonctl", len(src.recs), last.Kind, last.Actor)
			}
		})
	}
}

// A scan that ends before the snapshot's head is ErrInconsistent, never a
// shorter export; a missing key and a used directory are refused first.
func TestWriteRefusals(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	ctx := context.Background()
	src := newMemSource(t, key, 5)
	src.short = true
	if _, err := Write(ctx, src, Options{Dir: t.TempDir() + "/x", Key: key}); !errors.Is(err, ErrInconsistent) {
		t.Errorf("short scan: got %v, want ErrInconsistent", err)
	}
	src.short = false
	if _, err := Write(ctx, src, Options{Dir: t.TempDir() + "/y"}); cloison.ErrorCode(err) != cloison.CodeInvalid {
		t.Errorf("no key: got %v, want an invalid-argument error", err)
	}
	used := t.TempDir()
	if _, err := Write(ctx, src, Options{Dir: filepath.Dir(used), Key: key}); cloison.ErrorCode(err) != cloison.CodeInvalid {
		t.Errorf("used directory: got %v, want an invalid-argument error", err)
	}
}
