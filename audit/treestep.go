package audit

import (
	"golang.org/x/mod/sumdb/tlog"
)

// The ledger's Merkle tree grown a batch at a time. A store keeps the tree
// as C2SP tiles (TileHeight); a batch's step is computed from the
// frontier the previous batch left (TreeStep.Frontier) and, for hashes the
// frontier lacks, the stored tree. The maths is here, without a database,
// so the tree a verifier recomputes from the entries alone is exactly the
// one a writer stores.

// TileHeight is the height of the ledger tree's tiles (C2SP tlog-tiles): a
// tile of level L holds up to 256 hashes of tree level 8L.
const TileHeight = 8

// TreeStep is what appending one batch does to the Merkle tree: the stored
// hashes to insert (tlog.StoredHashIndex order, dense), the new root, and
// the frontier of the new tree (the hashes the next batch and its root
// read).
type TreeStep struct {
	Index    []int64
	Hashes   []tlog.Hash
	Root     tlog.Hash
	Frontier HashMap
}

// All returns the step's stored hashes and the frontier it extended, by
// stored index.
func (st TreeStep) All(frontier HashMap) HashMap {
	m := make(HashMap, len(frontier)+len(st.Index))
	for k, v := range frontier {
		m[k] = v
	}
	for i, x := range st.Index {
		m[x] = st.Hashes[i]
	}
	return m
}

// ExtendTree computes the step of appending recs, already placed
// (recs[0].Seq is the tree's size + 1, in order), reading earlier hashes
// from frontier first and stored second (nil: none; a hash neither holds
// is then an error).
//
// Errors: those of stored, or an error naming a hash neither holds.
func ExtendTree(stored tlog.HashReader, frontier HashMap, recs []Record) (TreeStep, error) {
	overlay := make(HashMap, len(frontier)+2*len(recs))
	for k, v := range frontier {
		overlay[k] = v
	}
	r := &overlayReader{overlay: overlay, next: stored}
	var st TreeStep
	for _, rec := range recs {
		n := int64(rec.Seq) - 1
		hs, err := tlog.StoredHashes(n, rec.Payload, r)
		if err != nil {
			return TreeStep{}, err
		}
		base := tlog.StoredHashIndex(0, n)
		for j, h := range hs {
			overlay[base+int64(j)] = h
			st.Index = append(st.Index, base+int64(j))
			st.Hashes = append(st.Hashes, h)
		}
	}
	size := int64(recs[len(recs)-1].Seq)
	r.seen = HashMap{}
	root, err := tlog.TreeHash(size, r)
	if err != nil {
		return TreeStep{}, err
	}
	st.Root, st.Frontier = root, r.seen
	return st, nil
}

// overlayReader answers from overlay first and next second, and records
// every hash it answers in seen when seen is set.
type overlayReader struct {
	overlay HashMap
	next    tlog.HashReader
	seen    HashMap
}

func (r *overlayReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var missing []int
	var want []int64
	for i, x := range indexes {
		if h, ok := r.overlay[x]; ok {
			out[i] = h
			continue
		}
		missing, want = append(missing, i), append(want, x)
	}
	if len(missing) > 0 {
		next := r.next
		if next == nil {
			next = HashMap(nil)
		}
		got, err := next.ReadHashes(want)
		if err != nil {
			return nil, err
		}
		for j, i := range missing {
			out[i] = got[j]
		}
	}
	if r.seen != nil {
		for i, x := range indexes {
			r.seen[x] = out[i]
		}
	}
	return out, nil
}

// Tile is one row of a tiled tree: the Width hashes of tree level
// TileHeight*Level at positions 256N .. 256N+Width-1.
type Tile struct {
	Level int
	N     int64
	Width int
	Data  []byte // Width hashes, concatenated
}

// TilesOfGrowth returns the tiles that growing a tree from size old to
// size n writes: per level, the tiles holding positions old>>8L ..
// n>>8L - 1, each at the width size n gives it, their hashes read from r.
//
// Errors: those of r.
func TilesOfGrowth(old, n int64, r tlog.HashReader) ([]Tile, error) {
	var out []Tile
	for l := 0; n>>(TileHeight*l) > 0; l++ {
		c0, c1 := old>>(TileHeight*l), n>>(TileHeight*l)
		if c1 == c0 {
			continue
		}
		for tn := c0 >> TileHeight; tn <= (c1-1)>>TileHeight; tn++ {
			w := min(1<<TileHeight, c1-tn<<TileHeight)
			t := tlog.Tile{H: TileHeight, L: l, N: tn, W: int(w)}
			data, err := tlog.ReadTileData(t, r)
			if err != nil {
				return nil, err
			}
			out = append(out, Tile{Level: l, N: tn, Width: int(w), Data: data})
		}
	}
	return out, nil
}
