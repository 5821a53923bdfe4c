package audit_test

import (
	"testing"

	"golang.org/x/mod/sumdb/tlog"
	"pgregory.net/rapid"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// A forest grown a page at a time, each page in a fresh forest started
// from the stored sizes and frontiers only (as an indexer that keeps its
// trees in a database does), stores exactly the hashes of each tenant's
// log built whole in memory: same roots, positions 1..n in ledger order,
// and a request index row for each request.completed leaf in its own
// tenant's log only. A forest pruned between pages gives the same rows.
func TestTenantForestPagesAreTheWholeLog(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tenants := []cloison.TenantID{"alpha", "beta", "gamma"}
		n := rapid.IntRange(1, 80).Draw(rt, "n")
		var ledger []audit.Record
		for i := 1; i <= n; i++ {
			var affected []cloison.TenantID
			if rapid.IntRange(0, 4).Draw(rt, "violation") == 0 {
				affected = []cloison.TenantID{tenants[rapid.IntRange(0, 2).Draw(rt, "other")]}
			}
			r := tenantRecord(rt, tenants[rapid.IntRange(0, 2).Draw(rt, "tenant")], i, affected...)
			r.Seq = uint64(i)
			ledger = append(ledger, r)
		}
		whole := map[cloison.TenantID]*audit.MemTree{}
		wantReqs := map[cloison.TenantID]int{}
		for _, r := range ledger {
			for _, l := range audit.TenantLeaves(r) {
				if whole[l.Tenant] == nil {
					whole[l.Tenant] = &audit.MemTree{}
				}
				if _, err := whole[l.Tenant].Append(l.Leaf); err != nil {
					rt.Fatal(err)
				}
			}
			if r.Kind == audit.KindRequestCompleted {
				wantReqs[r.Tenant]++
			}
		}

		stored := map[cloison.TenantID]audit.HashMap{}
		size := map[cloison.TenantID]int64{}
		pruned := audit.NewTenantForest()
		gotReqs := map[cloison.TenantID]int{}
		for lo := 0; lo < n; {
			hi := min(n, lo+rapid.IntRange(1, 16).Draw(rt, "page"))
			ls := audit.TenantLogLeaves(ledger[lo:hi])
			f := audit.NewTenantForest()
			for _, l := range ls {
				if f.Knows(l.Tenant) {
					continue
				}
				fr := audit.HashMap{}
				for _, x := range audit.FrontierIndexes(size[l.Tenant]) {
					fr[x] = stored[l.Tenant][x]
				}
				f.Start(l.Tenant, size[l.Tenant], fr)
			}
			step, err := f.Append(ls)
			if err != nil {
				rt.Fatal(err)
			}
			other, err := pruned.Append(ls)
			if err != nil {
				rt.Fatal(err)
			}
			pruned.Prune()
			if len(other.Hashes) != len(step.Hashes) || len(other.Positions) != len(step.Positions) {
				rt.Fatalf("a pruned forest added %d hashes and %d positions, a started one %d and %d",
					len(other.Hashes), len(other.Positions), len(step.Hashes), len(step.Positions))
			}
			for i, h := range step.Hashes {
				if other.Hashes[i] != h {
					rt.Fatalf("hash %d: pruned forest %v, started forest %v", i, other.Hashes[i], h)
				}
				if stored[h.Tenant] == nil {
					stored[h.Tenant] = audit.HashMap{}
				}
				if _, dup := stored[h.Tenant][h.Index]; dup {
					rt.Fatalf("tenant %s: hash %d stored twice", h.Tenant, h.Index)
				}
				stored[h.Tenant][h.Index] = h.Hash
			}
			for _, p := range step.Positions {
				if p.Pos != size[p.Tenant]+1 || p.Seq < int64(lo+1) || p.Seq > int64(hi) {
					rt.Fatalf("tenant %s: position %d (seq %d) after size %d in page %d..%d", p.Tenant, p.Pos, p.Seq, size[p.Tenant], lo+1, hi)
				}
				size[p.Tenant] = p.Pos
			}
			for _, r := range step.Requests {
				if ledger[r.Seq-1].Tenant != r.Tenant || ledger[r.Seq-1].Kind != audit.KindRequestCompleted {
					rt.Fatalf("request row %v is not its tenant's request.completed entry", r)
				}
				gotReqs[r.Tenant]++
			}
			lo = hi
		}
		for tn, m := range whole {
			if size[tn] != int64(m.Size()) || pruned.Size(tn) != size[tn] {
				rt.Fatalf("tenant %s: stored size %d, pruned forest %d, whole log %d", tn, size[tn], pruned.Size(tn), m.Size())
			}
			if int64(len(stored[tn])) != tlog.StoredHashCount(size[tn]) {
				rt.Fatalf("tenant %s: %d stored hashes, want %d", tn, len(stored[tn]), tlog.StoredHashCount(size[tn]))
			}
			want, err := m.Head("o", m.Size())
			if err != nil {
				rt.Fatal(err)
			}
			got, err := tlog.TreeHash(size[tn], stored[tn])
			if err != nil || got != want.Root {
				rt.Fatalf("tenant %s: stored root %v (%v), whole log %v", tn, got, err, want.Root)
			}
			if gotReqs[tn] != wantReqs[tn] {
				rt.Fatalf("tenant %s: %d request rows, want %d", tn, gotReqs[tn], wantReqs[tn])
			}
		}
	})
}

// A forest started with an incomplete frontier refuses to append rather
// than store hashes computed from zeros.
func TestTenantForestMissingFrontier(t *testing.T) {
	f := audit.NewTenantForest()
	f.Start("alpha", 3, audit.HashMap{}) // a tree of 3 needs two frontier hashes
	if _, err := f.Append([]audit.TenantLogLeaf{{Tenant: "alpha", Seq: 9, Leaf: []byte("{}")}}); err == nil {
		t.Fatal("got nil, want an error for a missing frontier hash")
	}
}
