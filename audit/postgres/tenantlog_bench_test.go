package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// BenchmarkTenantLog compares, on a ledger of 20,000 entries over 7
// tenants, what a tenant call costs: "stored" is TenantCheckpoint plus an
// inclusion proof on the stored, already indexed tenant trees; "scan" is
// recomputing the tenant's log from a ledger scan (what every tenant call
// did before migration 00013, and what an auditor does); "index-1000" is
// TenantCheckpoint after 1,000 new entries (the catch-up a call pays).
func BenchmarkTenantLog(b *testing.B) {
	ctx := context.Background()
	db := pgtest.New(b)
	s, err := Open(ctx, db.RuntimePool(b), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointEvery: 100000, CheckpointDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fill := func(n, from int) {
		for i := 0; i < n; i += 1000 {
			var evs []audit.Event
			for j := i; j < i+1000 && j < n; j++ {
				evs = append(evs, event("bench", from+j))
			}
			if err := s.readWrite(ctx, func(tx pgx.Tx) error { _, err := s.AppendTx(ctx, tx, evs...); return err }); err != nil {
				b.Fatal(err)
			}
		}
	}
	fill(20000, 0)
	const tn = cloison.TenantID("tenant-3")
	vkey, err := s.TreeVerifierKey()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.TenantCheckpoint(ctx, tn); err != nil {
		b.Fatal(err)
	}
	b.Run("stored", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cp, err := s.TenantCheckpoint(ctx, tn)
			if err != nil {
				b.Fatal(err)
			}
			h, _ := audit.OpenTenantHead(cp, vkey, tn)
			if _, _, err := s.TenantInclusionProof(ctx, tn, h.Size/2, h.Size); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			m := &audit.MemTree{}
			if err := s.Scan(ctx, 1, 0, func(r audit.Record) error {
				if leaf, ok := audit.TenantLeaf(r, tn); ok {
					_, err := m.Append(leaf)
					return err
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			if _, err := m.ProveRecord(m.Size()/2, m.Size()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("index-1000", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			fill(1000, 100000+i*1000)
			b.StartTimer()
			if _, err := s.TenantCheckpoint(ctx, tn); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRequestEntry compares, on a ledger of 20,000 entries over 7
// tenants (indexed once before the timer), what POST /v1/requests/{id}/verify
// costs the ledger: RequestEntry (request_entries and the stored tenant
// log) against the ledger scan it replaced (scanRequestEntry, the test
// oracle). Each iteration runs both, alternately, on a request spread over
// the ledger; ns/op is the pair, index-ns and scan-ns each side, ratio
// their quotient.
func BenchmarkRequestEntry(b *testing.B) {
	ctx := context.Background()
	db := pgtest.New(b)
	s, err := Open(ctx, db.RuntimePool(b), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointEvery: 100000, CheckpointDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 20000
	appendAll(b, s, requestEvents(0, n))
	if _, err := s.IndexTenantLogs(ctx); err != nil {
		b.Fatal(err)
	}
	req := func(i int) (cloison.TenantID, cloison.RequestID) {
		j := (i * 7919) % n // a completion whose id is its own: skip rejections, decisions, repeats
		for j%11 == 3 || j%13 == 5 || (j%50 == 49 && j >= 70) {
			j++
		}
		return cloison.TenantID(fmt.Sprintf("tenant-%d", j%7)), cloison.RequestID(fmt.Sprintf("req-%d", j))
	}
	var index, scan time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tn, id := req(i)
		t0 := time.Now()
		e, err := s.RequestEntry(ctx, tn, id)
		t1 := time.Now()
		o, oerr := scanRequestEntry(ctx, s, tn, id)
		t2 := time.Now()
		if err != nil || oerr != nil || e.Position != o.Position {
			b.Fatalf("%s %s: got %d, %v; the scan %d, %v", tn, id, e.Position, err, o.Position, oerr)
		}
		index, scan = index+t1.Sub(t0), scan+t2.Sub(t1)
	}
	b.ReportMetric(float64(index.Nanoseconds())/float64(b.N), "index-ns")
	b.ReportMetric(float64(scan.Nanoseconds())/float64(b.N), "scan-ns")
	b.ReportMetric(float64(scan)/float64(index), "ratio")
}
