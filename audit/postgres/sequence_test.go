package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// memHashes is a tlog.HashReader over a map: the tree as golang.org/x/mod
// computes it in memory, the oracle for audit_sequence's tree.
type memHashes map[int64]tlog.Hash

func (m memHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := m[x]
		if !ok {
			return nil, fmt.Errorf("hash %d missing", x)
		}
		out[i] = h
	}
	return out, nil
}

// audit_sequence (migration 00012) computes the chain and the RFC 6962
// stored hashes in the database. For batches of any size, starting at any
// tree size (so every shape of frontier), its chain is audit.Rechain's and
// every stored hash is the one tlog.StoredHashes computes, and the root is
// tlog.TreeHash's: the tree a third party recomputes with
// golang.org/x/mod/sumdb/tlog. The database's state carries from one batch
// to the next, so the sizes are one seeded random sequence (after powers of
// two that give every frontier shape up to 2^9 leaves), not independent
// cases for a property-test shrinker.
func TestSequenceMatchesTlog(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	pool := db.RuntimePool(t)
	oracle := memHashes{}
	var head audit.Head
	var n int64 // leaves so far
	sizes := []int{1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 1}
	rnd := rand.New(rand.NewPCG(13, 6))
	for range 40 {
		sizes = append(sizes, 1+rnd.IntN(70))
	}
	for _, k := range sizes {
		rt := t
		recs := make([]audit.Record, k)
		for i := range recs {
			r, err := event("seq", int(n)+i).Prepare()
			if err != nil {
				rt.Fatal(err)
			}
			recs[i] = r
		}
		if err := sequence(ctx, pool, recs); err != nil {
			rt.Fatalf("sequence: %v", err)
		}
		for _, r := range recs {
			want := audit.Rechain(r, head)
			if r.Seq != head.Seq+1 || r.Hash != want.Hash || r.PrevHash != head.Hash {
				rt.Fatalf("seq %d: got seq %d prev %x hash %x, want seq %d prev %x hash %x",
					head.Seq+1, r.Seq, r.PrevHash, r.Hash, want.Seq, want.PrevHash, want.Hash)
			}
			head = r.Head()
			hs, err := tlog.StoredHashes(n, r.Payload, oracle)
			if err != nil {
				rt.Fatal(err)
			}
			for j, h := range hs {
				oracle[tlog.StoredHashIndex(0, n)+int64(j)] = h
			}
			n++
		}
		checkTiles(rt, pool, n, oracle)
		want, err := tlog.TreeHash(n, oracle)
		if err != nil {
			rt.Fatal(err)
		}
		root, err := tlog.TreeHash(n, &treeReader{ctx: ctx, q: pool})
		if err != nil || root != want {
			rt.Fatalf("tree size %d: root %x %v, want %x", n, root, err, want)
		}
	}
}

// The frontier audit_sequence starts from is computed from the partial
// tiles of the committed size; a partial tile that is not there (rows removed behind the triggers) makes
// the batch fail (CL006 → ErrChainRejected) and nothing is written, never a
// tree built on a guessed hash.
func TestSequenceRefusesMissingFrontier(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	// Its tree is damaged below: Close's tree note fails, as it should.
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	for i := 0; i < 3; i++ { // tree size 3: frontier levels 0 and 1
		if _, err := s.Append(ctx, event("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	admin := db.AdminPool(t)
	treeSuperuser(t, admin, "DELETE FROM tlog_tiles WHERE width = 3") // tile 0/0 of size 3 (frontier levels 0 and 1)
	r, err := event("a", 3).Prepare()
	if err != nil {
		t.Fatal(err)
	}
	err = translate(sequence(ctx, s.pool, []audit.Record{r}))
	if !errors.Is(err, ErrChainRejected) {
		t.Fatalf("got %v, want ErrChainRejected", err)
	}
	h, err := s.Head(ctx)
	if err != nil || h.Seq != 3 {
		t.Fatalf("head %+v %v, want seq 3: nothing written", h, err)
	}
}

// A batch audit_sequence cannot place (empty, arrays of different
// lengths, a null payload) is refused with nothing written.
func TestSequenceRefusesMalformedBatch(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	pool := db.RuntimePool(t)
	r, err := event("a", 0).Prepare()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []any
	}{
		{"empty", []any{[]time.Time{}, []string{}, []*string{}, []string{}, [][]byte{}}},
		{"lengths differ", []any{[]time.Time{r.OccurredAt, r.OccurredAt}, []string{string(r.Kind)}, []*string{nil}, []string{"a"}, [][]byte{r.Payload}}},
		{"null payload", []any{[]time.Time{r.OccurredAt}, []string{string(r.Kind)}, []*string{nil}, []string{"a"}, [][]byte{nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pool.Exec(ctx, sequenceSQL, tt.args...)
			if err = translate(err); !errors.Is(err, ErrChainRejected) {
				t.Fatalf("got %v, want ErrChainRejected", err)
			}
			var n int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n); err != nil || n != 0 {
				t.Fatalf("%d events %v, want none", n, err)
			}
		})
	}
}

// checkTiles holds every stored tile row to the oracle's hashes and
// requires the rows of size n (tileRows(0, n)) to be there: what
// C2SP tlog-tiles serves for that tree.
func checkTiles(t *testing.T, q querier, n int64, oracle memHashes) {
	t.Helper()
	ctx := context.Background()
	rows, err := q.Query(ctx, "SELECT level, n, width, hashes FROM tlog_tiles")
	if err != nil {
		t.Fatal(err)
	}
	have := map[tlog.Tile]bool{}
	for rows.Next() {
		var l, w int32
		var tn int64
		var data []byte
		if err := rows.Scan(&l, &tn, &w, &data); err != nil {
			t.Fatal(err)
		}
		tile := tlog.Tile{H: tileHeight, L: int(l), N: tn, W: int(w)}
		want, err := tlog.ReadTileData(tile, oracle)
		if err != nil || string(want) != string(data) {
			t.Fatalf("tree size %d: tile %+v is not the oracle's (%v)", n, tile, err)
		}
		have[tile] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rs, err := tileRows(0, n, oracle)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs.levels {
		tile := tlog.Tile{H: tileHeight, L: int(rs.levels[i]), N: rs.ns[i], W: int(rs.widths[i])}
		if !have[tile] {
			t.Fatalf("tree size %d: tile %+v is missing", n, tile)
		}
	}
}

// Past 65,536 leaves the tree has level-2 tiles (tree level 16) and a
// frontier above level 16: audit_sequence's tiles still are the oracle's,
// in large batches and in small ones that straddle tile boundaries at
// every level, and proofs read from them check.
func TestSequenceTilesLevel2(t *testing.T) {
	if testing.Short() {
		t.Skip("66,000 events")
	}
	db := pgtest.New(t)
	ctx := context.Background()
	pool := db.RuntimePool(t)
	oracle := memHashes{}
	var n int64
	var recs []audit.Record
	sizes := []int{8192, 8192, 8192, 8192, 8192, 8192, 8192, 8191, 1, 1, 255, 300, 1, 7000}
	for _, k := range sizes {
		batch := make([]audit.Record, k)
		for i := range batch {
			r, err := event("l2", int(n)+i).Prepare()
			if err != nil {
				t.Fatal(err)
			}
			batch[i] = r
		}
		if err := sequence(ctx, pool, batch); err != nil {
			t.Fatalf("sequence at size %d: %v", n, err)
		}
		for _, r := range batch {
			hs, err := tlog.StoredHashes(n, r.Payload, oracle)
			if err != nil {
				t.Fatal(err)
			}
			for j, h := range hs {
				oracle[tlog.StoredHashIndex(0, n)+int64(j)] = h
			}
			n++
		}
		recs = append(recs, batch...)
	}
	checkTiles(t, pool, n, oracle)
	want, err := tlog.TreeHash(n, oracle)
	if err != nil {
		t.Fatal(err)
	}
	r := &treeReader{ctx: ctx, q: pool}
	root, err := tlog.TreeHash(n, r)
	if err != nil || root != want {
		t.Fatalf("root %x %v, want %x", root, err, want)
	}
	for _, seq := range []int64{1, 256, 65536, 65537, n} {
		p, err := tlog.ProveRecord(n, seq-1, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckRecord(p, n, root, seq-1, tlog.RecordHash(recs[seq-1].Payload)); err != nil {
			t.Fatalf("inclusion of %d: %v", seq, err)
		}
	}
	for _, old := range []int64{1, 65535, 65536, 65537, n - 1} {
		oldRoot, err := tlog.TreeHash(old, oracle)
		if err != nil {
			t.Fatal(err)
		}
		p, err := tlog.ProveTree(n, old, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckTree(p, n, root, old, oldRoot); err != nil {
			t.Fatalf("consistency from %d: %v", old, err)
		}
	}
}
