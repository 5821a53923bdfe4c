package audit_test

import (
	"bytes"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
	"pgregory.net/rapid"

	"github.com/cloison/cloison/audit"
)

// A tree grown a batch at a time from the previous batch's frontier alone
// (nothing stored to fall back on) has the root and the stored hashes of
// the tree built whole, and the tiles of each growth are that tree's
// tiles at the new size.
func TestExtendTreeFromFrontierIsTheWholeTree(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 700).Draw(rt, "n")
		var recs []audit.Record
		var whole audit.MemTree
		for i := 1; i <= n; i++ {
			r := tenantRecord(rt, "alpha", i)
			r.Seq = uint64(i)
			recs = append(recs, r)
			if _, err := whole.Append(r.Payload); err != nil {
				rt.Fatal(err)
			}
		}
		var frontier audit.HashMap
		stored := audit.HashMap{}
		for lo := 0; lo < n; {
			hi := min(n, lo+rapid.IntRange(1, 300).Draw(rt, "batch"))
			st, err := audit.ExtendTree(nil, frontier, recs[lo:hi])
			if err != nil {
				rt.Fatal(err)
			}
			if len(st.Index) != int(tlog.StoredHashCount(int64(hi))-tlog.StoredHashCount(int64(lo))) {
				rt.Fatalf("batch %d..%d: %d stored hashes", lo+1, hi, len(st.Index))
			}
			for i, x := range st.Index {
				if x != tlog.StoredHashCount(int64(lo))+int64(i) {
					rt.Fatalf("batch %d..%d: stored index %d at %d, not dense", lo+1, hi, x, i)
				}
				stored[x] = st.Hashes[i]
			}
			want, err := whole.Head("o", uint64(hi))
			if err != nil {
				rt.Fatal(err)
			}
			if st.Root != want.Root {
				rt.Fatalf("size %d: root %v, the whole tree's %v", hi, st.Root, want.Root)
			}
			tiles, err := audit.TilesOfGrowth(int64(lo), int64(hi), stored)
			if err != nil {
				rt.Fatal(err)
			}
			for _, tl := range tiles {
				data, err := tlog.ReadTileData(tlog.Tile{H: audit.TileHeight, L: tl.Level, N: tl.N, W: tl.Width}, &whole)
				if err != nil || !bytes.Equal(data, tl.Data) {
					rt.Fatalf("tile %d/%d.w%d is not the whole tree's (%v)", tl.Level, tl.N, tl.Width, err)
				}
			}
			frontier, lo = st.Frontier, hi
		}
	})
}

// Without its frontier a batch cannot be placed: ExtendTree refuses
// rather than hash against zeros.
func TestExtendTreeWithoutFrontier(t *testing.T) {
	r := tenantRecord(t, "alpha", 2)
	r.Seq = 2
	if _, err := audit.ExtendTree(nil, nil, []audit.Record{r}); err == nil {
		t.Fatal("got nil, want an error for a missing frontier hash")
	}
}
