package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// A scan whose caller stops (a client that stopped
// reading) holds no connection, of either pool. Before, Scan ran in one
// REPEATABLE READ transaction on the store's only pool, so a blocked fn
// held a connection for as long as it blocked.
func TestScanHoldsNoConnectionWhileCallerBlocks(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	onePool := func() *pgxpool.Pool {
		cfg, err := db.RuntimeConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 1
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	requests, scans := onePool(), onePool()
	s, err := Open(ctx, requests, Config{Origin: "scan-test", ScanPool: scans, ScanPage: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := 0; i < 35; i++ {
		if _, err := s.Append(ctx, event("scan", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"request pool", requests}, {"scan pool", scans}} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []uint64
			err := s.Scan(ctx, 1, 0, func(r audit.Record) error {
				seen = append(seen, r.Seq)
				if r.Seq == 1 || r.Seq == 15 {
					// While the scan's caller holds a row, the pool's one
					// connection is free.
					qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					var one int
					if err := tc.pool.QueryRow(qctx, "SELECT 1").Scan(&one); err != nil {
						t.Errorf("query on the %s during a scan (row %d): got %v, want it served", tc.name, r.Seq, err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != 35 || seen[0] != 1 || seen[34] != 35 {
				t.Errorf("got rows %v, want 1..35 in order", seen)
			}
		})
	}
	// Verify pages the same way and still checks the whole chain.
	res, err := s.Verify(ctx, audit.VerifyOptions{ChainOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 35 {
		t.Errorf("verify: got %d events, want 35", res.Events)
	}
}
