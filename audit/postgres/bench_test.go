package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// BenchmarkAppendVsRawBatch appends b.N events through the group-commit
// writer from 64 or 256 goroutines (each waiting for durability, as a server's
// request goroutines would), then inserts b.N equal rows, unchained, into a
// trigger-less copy of the table with raw pgx.Batch pipelines of 256 rows
// per transaction from one connection. It reports both rates and their ratio,
// and the Append latency percentiles.
func BenchmarkAppendVsRawBatch(b *testing.B) {
	// The writer's batches are as large as the number of appends waiting:
	// with 256 concurrent appenders they match the baseline's 256 rows per
	// transaction; with 64 they are at most a quarter of it.
	for _, workers := range []int{64, 256} {
		b.Run(fmt.Sprintf("appenders=%d", workers), func(b *testing.B) { benchAppendVsRaw(b, workers) })
	}
}

func benchAppendVsRaw(b *testing.B, workers int) {
	db := pgtest.New(b)
	ctx := context.Background()
	pool := db.RuntimePool(b)
	s, err := Open(ctx, pool, Config{Origin: "bench", SigningKey: testKey, CheckpointEvery: 10000, CheckpointDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	admin := db.AdminPool(b)
	if _, err := admin.Exec(ctx, `CREATE TABLE bench_raw (LIKE audit_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)`); err != nil {
		b.Fatal(err)
	}
	n := b.N
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				if _, err := s.Append(ctx, event("bench", i)); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	chained := time.Since(start)
	b.StopTimer()

	// Raw baseline: the same rows (payloads, hashes) without chaining,
	// locking or triggers.
	recs := make([]audit.Record, 0, n)
	if err := s.Scan(ctx, 1, uint64(n), func(r audit.Record) error { recs = append(recs, r); return nil }); err != nil {
		b.Fatal(err)
	}
	conn, err := admin.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	start = time.Now()
	for i := 0; i < len(recs); i += 256 {
		batch := &pgx.Batch{}
		for _, r := range recs[i:min(i+256, len(recs))] {
			var tenant *string
			if r.Tenant != "" {
				t := string(r.Tenant)
				tenant = &t
			}
			batch.Queue(`INSERT INTO bench_raw (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				int64(r.Seq), r.OccurredAt, string(r.Kind), tenant, string(r.Actor), r.Payload, r.PrevHash[:], r.Hash[:])
		}
		if err := conn.SendBatch(ctx, batch).Close(); err != nil {
			b.Fatal(err)
		}
	}
	raw := time.Since(start)

	slices.Sort(lat)
	rate, rawRate := float64(n)/chained.Seconds(), float64(len(recs))/raw.Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(rawRate, "raw_events/s")
	b.ReportMetric(rate/rawRate, "ratio")
	b.ReportMetric(float64(lat[n/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[n*99/100].Microseconds())/1000, "p99_ms")
}

// BenchmarkVerify streams and verifies a ledger of 20,000 events from the
// database (hashes, canonical form, columns, checkpoints).
func BenchmarkVerify(b *testing.B) {
	const events = 20000
	db := pgtest.New(b)
	ctx := context.Background()
	s, err := Open(ctx, db.RuntimePool(b), Config{Origin: "bench", SigningKey: testKey, CheckpointEvery: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < events; i += 32 {
				if _, err := s.Append(ctx, event(fmt.Sprintf("v%d", w), i)); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
		if err != nil || res.Events != events {
			b.Fatalf("got %v, %v", res, err)
		}
	}
	b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkIntegrate measures the integrator alone, the sequencing
// ceiling of a cluster (one integrator per database): b.N rows staged
// beforehand (not timed) are sequenced by audit_integrate(8192) calls
// until none is left, on the schema before the tree tiles (00022:
// audit_sequence of 00012, one tlog_hashes row per stored hash), after
// (00024: tlog_tiles) and with audit_sequence the only writer (00025: the
// chain trigger does not rehash its rows), alternately when run with
// -count. Reported: events/s and ms per full call.
func BenchmarkIntegrate(b *testing.B) {
	for _, schema := range []int64{22, 24, 25, 26} {
		b.Run(fmt.Sprintf("schema=%05d", schema), func(b *testing.B) { benchIntegrate(b, schema) })
	}
}

func benchIntegrate(b *testing.B, schema int64) {
	db := pgtest.NewAt(b, schema)
	ctx := context.Background()
	pool := db.RuntimePool(b)
	n := b.N
	for i := 0; i < n; i += 8192 {
		var at []time.Time
		var kinds, actors []string
		var tenants []*string
		var payloads [][]byte
		for j := i; j < min(i+8192, n); j++ {
			r, err := event("bench", j).Prepare()
			if err != nil {
				b.Fatal(err)
			}
			tn := string(r.Tenant)
			at, kinds, tenants, actors, payloads = append(at, r.OccurredAt), append(kinds, string(r.Kind)),
				append(tenants, &tn), append(actors, string(r.Actor)), append(payloads, r.Payload)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO audit_staging (occurred_at, kind, tenant, actor, payload)
			SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bytea[])`, at, kinds, tenants, actors, payloads); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.AdminPool(b).Exec(ctx, "CHECKPOINT"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	done, calls := 0, 0
	for {
		var k int
		if err := pool.QueryRow(ctx, "SELECT n FROM audit_integrate(8192)").Scan(&k); err != nil {
			b.Fatal(err)
		}
		if k == 0 {
			break
		}
		done += k
		calls++
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if done != n {
		b.Fatalf("integrated %d, want %d", done, n)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(calls), "ms/call")
}

// BenchmarkStagingInsert measures one stager's statement, 1,024 staged
// events (Config.MaxBatch's default) in one INSERT, before (00025) and
// after (00026: audit_staging_check parses every payload) the payload
// check. Reported: events/s of one stager.
func BenchmarkStagingInsert(b *testing.B) {
	for _, schema := range []int64{25, 26} {
		b.Run(fmt.Sprintf("schema=%05d", schema), func(b *testing.B) {
			db := pgtest.NewAt(b, schema)
			ctx := context.Background()
			pool := db.RuntimePool(b)
			var at []time.Time
			var kinds, actors []string
			var tenants []*string
			var payloads [][]byte
			for j := range 1024 {
				r, err := event("bench", j).Prepare()
				if err != nil {
					b.Fatal(err)
				}
				tn := string(r.Tenant)
				at, kinds, tenants, actors, payloads = append(at, r.OccurredAt), append(kinds, string(r.Kind)),
					append(tenants, &tn), append(actors, string(r.Actor)), append(payloads, r.Payload)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := pool.Exec(ctx, `INSERT INTO audit_staging (occurred_at, kind, tenant, actor, payload)
					SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bytea[])`, at, kinds, tenants, actors, payloads); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(1024*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
