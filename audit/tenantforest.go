package audit

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
)

// Tenant logs grown a page of ledger entries at a time. A store that keeps
// every tenant's log as stored tree hashes (tlog.StoredHashIndex) derives
// them from the committed ledger: it reads a page of entries
// (TenantLogLeaves), loads into a TenantForest the size and frontier of
// each tenant the page touches (FrontierIndexes names the hashes to load),
// appends (Append: the rows to store) and, over a long run, prunes the
// forest back to its frontiers (Prune). The maths is here, without a
// database, so a verifier recomputes exactly what the indexer stored.

// TenantLogLeaf is one tenant-log leaf of a ledger entry.
type TenantLogLeaf struct {
	Tenant cloison.TenantID
	Seq    uint64 // the ledger entry's
	Leaf   []byte // TenantLeaf of the entry for Tenant
	// Request is the request id of a request.completed entry, set in its
	// own tenant's leaf only; "" otherwise.
	Request cloison.RequestID
}

// TenantLogLeaves returns the tenant-log leaves of recs, in ledger order
// (per entry, in TenantsNamed order).
func TenantLogLeaves(recs []Record) []TenantLogLeaf {
	var out []TenantLogLeaf
	for _, r := range recs {
		req, reqTenant := completedRequest(r)
		for _, l := range TenantLeaves(r) {
			x := TenantLogLeaf{Tenant: l.Tenant, Seq: r.Seq, Leaf: l.Leaf}
			if l.Tenant == reqTenant {
				x.Request = req
			}
			out = append(out, x)
		}
	}
	return out
}

// completedRequest returns the request id and tenant of a request.completed
// entry, read from its hashed payload (the kind column only filters), and
// "" for any other entry.
func completedRequest(r Record) (cloison.RequestID, cloison.TenantID) {
	if r.Kind != KindRequestCompleted {
		return "", ""
	}
	env, err := DecodeEnvelope(r.Payload)
	if err != nil || env.Kind != KindRequestCompleted || env.Tenant == "" {
		return "", ""
	}
	p, err := env.DecodePayload()
	if err != nil {
		return "", ""
	}
	return p.(*RequestCompleted).Request, env.Tenant
}

// HashMap is a tlog.HashReader over stored hashes held in memory.
type HashMap map[int64]tlog.Hash

// ReadHashes implements tlog.HashReader.
//
// Errors: an error naming the first index the map lacks.
func (m HashMap) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := m[x]
		if !ok {
			return nil, fmt.Errorf("tree hash %d is missing", x)
		}
		out[i] = h
	}
	return out, nil
}

// FrontierIndexes returns the stored-hash indexes of the complete subtrees
// of a tree of n leaves: all that appending to it and its root read.
func FrontierIndexes(n int64) []int64 {
	var out []int64
	for l := 0; n>>uint(l) > 0; l++ {
		if (n>>uint(l))&1 == 1 {
			out = append(out, tlog.StoredHashIndex(l, n>>uint(l)-1))
		}
	}
	return out
}

// TenantForest holds, for each tenant log it knows, its size and the
// stored hashes the next append and its root read (at least its
// frontier). It is not safe for concurrent use.
type TenantForest struct {
	size     map[cloison.TenantID]int64
	frontier map[cloison.TenantID]HashMap
}

// NewTenantForest returns a forest that knows no tenant.
func NewTenantForest() *TenantForest {
	return &TenantForest{size: map[cloison.TenantID]int64{}, frontier: map[cloison.TenantID]HashMap{}}
}

// Knows reports whether the forest holds tenant t's log (Start or Append).
func (f *TenantForest) Knows(t cloison.TenantID) bool {
	_, ok := f.size[t]
	return ok
}

// Start sets tenant t's log to size leaves whose frontier
// (FrontierIndexes(size)) is in frontier; a nil frontier is an empty one.
// The forest owns frontier from then on.
func (f *TenantForest) Start(t cloison.TenantID, size int64, frontier HashMap) {
	if frontier == nil {
		frontier = HashMap{}
	}
	f.size[t], f.frontier[t] = size, frontier
}

// Size returns the number of leaves of tenant t's log (0 when unknown).
func (f *TenantForest) Size(t cloison.TenantID) int64 { return f.size[t] }

// Sizes returns every known tenant log's size; the map is the forest's
// own, to read only.
func (f *TenantForest) Sizes() map[cloison.TenantID]int64 { return f.size }

// TenantPosition is one (tenant, position) of a tenant log: leaf Pos
// (1-based) is ledger entry Seq's.
type TenantPosition struct {
	Tenant cloison.TenantID
	Pos    int64
	Seq    int64
}

// TenantHash is one stored hash of a tenant tree.
type TenantHash struct {
	Tenant cloison.TenantID
	Index  int64 // tlog.StoredHashIndex
	Hash   tlog.Hash
}

// TenantRequest indexes a request.completed leaf by its request id.
type TenantRequest struct {
	Tenant  cloison.TenantID
	Request cloison.RequestID
	Pos     int64
	Seq     int64
}

// TenantLogStep is what appending leaves to a forest adds: the positions,
// the stored hashes and the request index, each in append order.
type TenantLogStep struct {
	Positions []TenantPosition
	Hashes    []TenantHash
	Requests  []TenantRequest
}

// Append appends ls, in order, to their tenants' logs, starting an empty
// log for a tenant the forest does not know, and returns what it added.
//
// Errors: when a known log's frontier lacks a hash (Start was given an
// incomplete one); the forest is then partly appended.
func (f *TenantForest) Append(ls []TenantLogLeaf) (TenantLogStep, error) {
	var out TenantLogStep
	for _, l := range ls {
		if !f.Knows(l.Tenant) {
			f.Start(l.Tenant, 0, nil)
		}
		n := f.size[l.Tenant]
		fr := f.frontier[l.Tenant]
		hs, err := tlog.StoredHashes(n, l.Leaf, fr)
		if err != nil {
			return TenantLogStep{}, err
		}
		base := tlog.StoredHashIndex(0, n)
		for j, h := range hs {
			fr[base+int64(j)] = h
			out.Hashes = append(out.Hashes, TenantHash{Tenant: l.Tenant, Index: base + int64(j), Hash: h})
		}
		f.size[l.Tenant] = n + 1
		out.Positions = append(out.Positions, TenantPosition{Tenant: l.Tenant, Pos: n + 1, Seq: int64(l.Seq)})
		if l.Request != "" {
			out.Requests = append(out.Requests, TenantRequest{Tenant: l.Tenant, Request: l.Request, Pos: n + 1, Seq: int64(l.Seq)})
		}
	}
	return out, nil
}

// Prune keeps only each log's frontier, so that memory stays O(tenants ×
// log n) over a whole ledger.
func (f *TenantForest) Prune() {
	for t, fr := range f.frontier {
		keep := HashMap{}
		for _, x := range FrontierIndexes(f.size[t]) {
			keep[x] = fr[x]
		}
		f.frontier[t] = keep
	}
}
