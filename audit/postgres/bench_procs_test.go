package postgres

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// benchProcs shapes BenchmarkLedgerFourWriters: four writer processes
// (four cloisond nodes on one database), each with its request goroutines
// appending and waiting for durability.
const (
	benchProcs   = 4
	rawBatchRows = 256
)

// benchReport is what a writer process prints when done.
type benchReport struct {
	N         int     `json:"n"`
	ElapsedNS int64   `json:"elapsed_ns"`
	LatUS     []int64 `json:"lat_us"` // each Append's latency, in µs
}

// benchWriterProcess is the "bench" helper: it appends CLOISON_HELPER_N
// events from CLOISON_HELPER_APPENDERS goroutines (or, when
// CLOISON_HELPER_RATE is set, one per event at that many a second) once its parent writes a
// line on stdin (so that all writers start together), then prints a
// benchReport.
func benchWriterProcess(ctx context.Context, pool *pgxpool.Pool) int {
	// A node's configuration: the defaults, a checkpoint directory
	// (CLOISON_BENCH_STAGERS overrides Config.Stagers, to weigh it).
	stagers, _ := strconv.Atoi(os.Getenv("CLOISON_BENCH_STAGERS"))
	s, err := Open(ctx, pool, Config{Origin: "test-ledger", SigningKey: testKey, CheckpointDir: os.Getenv("CLOISON_HELPER_DIR"), Stagers: stagers})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	n, _ := strconv.Atoi(os.Getenv("CLOISON_HELPER_N"))
	appenders, _ := strconv.Atoi(os.Getenv("CLOISON_HELPER_APPENDERS"))
	me := os.Getenv("CLOISON_HELPER_NAME")
	// Warm: a node's pool holds its connections in the steady state; the
	// run must not count their establishment in the first requests.
	var conns []*pgxpool.Conn
	for i := int32(0); i < pool.Config().MaxConns; i++ {
		c, err := pool.Acquire(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lat := make([]int64, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Bool
	stage := func(g, i int, from time.Time) {
		if _, err := s.Stage(ctx, event(fmt.Sprintf("%s-g%d", me, g), i)); err != nil {
			if failed.CompareAndSwap(false, true) {
				fmt.Fprintln(os.Stderr, err)
			}
			return
		}
		lat[i] = time.Since(from).Microseconds()
	}
	start := time.Now()
	if rate, _ := strconv.Atoi(os.Getenv("CLOISON_HELPER_RATE")); rate > 0 {
		// Open loop: event i is due at start + i/rate and its latency is
		// counted from then, not from when a goroutine got to it, so a
		// ledger that falls behind pays for the queue (no coordinated
		// omission). Each event is its own goroutine: no cap on in flight.
		interval := time.Second / time.Duration(rate)
		for i := 0; i < n; {
			due := min(int(time.Since(start)/interval)+1, n)
			for ; i < due; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					stage(i%64, i, start.Add(time.Duration(i)*interval))
				}(i)
			}
			time.Sleep(200 * time.Microsecond)
		}
	} else {
		for g := 0; g < appenders; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= n || failed.Load() {
						return
					}
					stage(g, i, time.Now())
				}
			}(g)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Sustained means sequenced too: the run ends when the integrator (in
	// whichever process holds the lock) has caught up. An offered load
	// above its pace leaves a backlog longer than Sync's bound: keep
	// syncing (the time counts), for at most a minute.
	for deadline := time.Now().Add(time.Minute); ; {
		err := s.Sync(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrPending) || time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "sync:", err)
			return 1
		}
	}
	elapsed = max(elapsed, time.Since(start))
	if err := s.Close(); err != nil || failed.Load() {
		fmt.Fprintln(os.Stderr, "close:", err)
		return 1
	}
	b, _ := json.Marshal(benchReport{N: n, ElapsedNS: elapsed.Nanoseconds(), LatUS: lat})
	fmt.Println(string(b))
	return 0
}

// BenchmarkLedgerFourWriters (make bench-ledger) measures the ledger as a
// cluster writes it: four writer processes, each its own
// Store and connection pool on one database, append b.N events in total,
// every Stage waiting for its durable commit (the latency a request pays),
// the run ending once every event is sequenced (Sync). In the same
// run, four connections insert the same rows, unchained and without
// triggers, into a copy of the table with raw pgx.Batch pipelines of 256
// rows per transaction: the database's own ceiling on this machine (the
// copy always has the four indexes audit_events had up to migration
// 00021, so the baseline is the same for both schemas). Reported:
// appends/s, raw_rows/s, their ratio, Append p50/p99 (ms) and the raw
// batch p99 (ms).
//
// Two load shapes. closed=4xG: G goroutines per process, each appending
// when its last append returned (16, 64 or 256 in flight): by Little's law
// the mean latency is the requests in flight over the throughput (256 at
// 20,000/s is 12.8 ms on average whatever the ledger does), so this is
// the throughput figure. open=R: an offered load of R events/s in total
// (R/4 per process, CLOISON_BENCH_RATES, default 4000 and 8000), each
// event started when due whatever is in flight and its latency counted
// from when it was due: the latency a request pays at that load, and
// appends/s below R when the ledger cannot keep up.
//
// It runs on the latest schema (schema=00025: audit_sequence the only
// writer of the chain and tree). The store reads the tiles, so an earlier
// schema is measured with that commit's own build:
// scripts/bench-ledger-ab.sh runs the test binaries of two commits
// alternately in one run (before 00024, the same benchmark named its
// schemas 00021 and 00022; before 00025, 00024).
func BenchmarkLedgerFourWriters(b *testing.B) {
	rates := []int{4000, 8000}
	if v := os.Getenv("CLOISON_BENCH_RATES"); v != "" {
		rates = nil
		for _, f := range strings.Split(v, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || r <= 0 {
				b.Fatalf("CLOISON_BENCH_RATES: %q", v)
			}
			rates = append(rates, r)
		}
	}
	type shape struct {
		name            string
		appenders, rate int
	}
	var shapes []shape
	for _, g := range []int{16, 64} {
		shapes = append(shapes, shape{fmt.Sprintf("closed=%dx%d", benchProcs, g), g, 0})
	}
	for _, r := range rates {
		shapes = append(shapes, shape{fmt.Sprintf("open=%d", r), 0, r})
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			for _, schema := range []int64{25} {
				b.Run(fmt.Sprintf("schema=%05d", schema), func(b *testing.B) { benchFourWriters(b, sh.appenders, sh.rate, schema) })
			}
		})
	}
}

func benchFourWriters(b *testing.B, appenders, rate int, schema int64) {
	var db *pgtest.DB
	if schema == 25 {
		db = pgtest.New(b)
	} else {
		db = pgtest.NewAt(b, schema)
	}
	ctx := context.Background()
	dir := b.TempDir()
	per := max(b.N/benchProcs, 1)
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	children := make([]child, benchProcs)
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CLOISON_AUDIT_HELPER=bench", "CLOISON_HELPER_URL="+db.AdminURL,
			"CLOISON_HELPER_ROLE="+db.Roles.Runtime, "CLOISON_HELPER_N="+strconv.Itoa(per), "CLOISON_HELPER_DIR="+dir,
			"CLOISON_HELPER_NAME=w"+strconv.Itoa(i), "CLOISON_HELPER_APPENDERS="+strconv.Itoa(appenders),
			"CLOISON_HELPER_RATE="+strconv.Itoa(rate/benchProcs))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		children[i] = child{cmd, stdin, bufio.NewReaderSize(stdout, 1<<20)}
	}
	for _, c := range children {
		if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
			b.Fatalf("writer process: %q %v", line, err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	for _, c := range children {
		_, _ = io.WriteString(c.stdin, "go\n")
	}
	var lat []int64
	total := 0
	for _, c := range children {
		line, err := c.out.ReadString('\n')
		if err != nil {
			b.Fatalf("writer process: %v", err)
		}
		var r benchReport
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			b.Fatal(err)
		}
		if err := c.cmd.Wait(); err != nil {
			b.Fatalf("writer process: %v", err)
		}
		lat = append(lat, r.LatUS...)
		total += r.N
	}
	chained := time.Since(start)
	b.StopTimer()

	// Raw baseline: the same rows (payloads, hashes), four connections.
	admin := db.AdminPool(b)
	if _, err := admin.Exec(ctx, `CREATE TABLE bench_raw (LIKE audit_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)`); err != nil {
		b.Fatal(err)
	}
	if schema >= 22 { // the baseline keeps 00021's indexes
		if _, err := admin.Exec(ctx, `ALTER TABLE bench_raw ADD UNIQUE (hash);
			CREATE INDEX ON bench_raw (tenant, seq) WHERE tenant IS NOT NULL`); err != nil {
			b.Fatal(err)
		}
	}
	s, err := Open(ctx, db.RuntimePool(b), Config{Origin: "test-ledger"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := make([]audit.Record, 0, total)
	if err := s.Scan(ctx, 1, 0, func(r audit.Record) error { recs = append(recs, r); return nil }); err != nil {
		b.Fatal(err)
	}
	var rawLat []time.Duration
	var rawMu sync.Mutex
	var wg sync.WaitGroup
	var nextBatch atomic.Int64
	start = time.Now()
	for w := 0; w < benchProcs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := admin.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Release()
			for {
				i := int(nextBatch.Add(1)-1) * rawBatchRows
				if i >= len(recs) {
					return
				}
				batch := &pgx.Batch{}
				for _, r := range recs[i:min(i+rawBatchRows, len(recs))] {
					var tenant *string
					if r.Tenant != "" {
						t := string(r.Tenant)
						tenant = &t
					}
					batch.Queue(`INSERT INTO bench_raw (seq, occurred_at, kind, tenant, actor, payload, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
						int64(r.Seq), r.OccurredAt, string(r.Kind), tenant, string(r.Actor), r.Payload, r.PrevHash[:], r.Hash[:])
				}
				t := time.Now()
				if err := conn.SendBatch(ctx, batch).Close(); err != nil {
					b.Error(err)
					return
				}
				rawMu.Lock()
				rawLat = append(rawLat, time.Since(t))
				rawMu.Unlock()
			}
		}()
	}
	wg.Wait()
	raw := time.Since(start)
	if len(recs) != total {
		b.Fatalf("ledger holds %d events, want %d", len(recs), total)
	}

	slices.Sort(lat)
	slices.Sort(rawLat)
	got, rawRate := float64(total)/chained.Seconds(), float64(len(recs))/raw.Seconds()
	b.ReportMetric(got, "appends/s")
	b.ReportMetric(rawRate, "raw_rows/s")
	b.ReportMetric(got/rawRate, "ratio")
	b.ReportMetric(float64(lat[len(lat)/2])/1000, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1000, "p99_ms")
	b.ReportMetric(float64(rawLat[len(rawLat)*99/100].Microseconds())/1000, "raw_batch_p99_ms")
}

// Two writers on one database append concurrently, their batches
// interleaved: every seq is acknowledged once, and the chain, its
// checkpoints and the Merkle tree (computed by audit_sequence in the
// database) verify, the tree against tlog recomputed in Go.
func TestWritersUnderContention(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	stores := []*Store{openStore(t, db.RuntimePool(t), t.TempDir(), 200), openStore(t, db.RuntimePool(t), t.TempDir(), 200)}
	const goroutines, each = 8, 150
	var wg sync.WaitGroup
	var mu sync.Mutex
	owner := map[uint64]int{}
	for w, s := range stores {
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					r, err := s.Append(ctx, event(fmt.Sprintf("w%d-g%d", w, g), i))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if _, dup := owner[r.Seq]; dup {
						t.Errorf("seq %d acknowledged twice", r.Seq)
					}
					owner[r.Seq] = w
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	const total = 2 * goroutines * each
	switches := 0
	for seq := uint64(1); seq <= total; seq++ {
		if _, ok := owner[seq]; !ok {
			t.Fatalf("seq %d never acknowledged", seq)
		}
		if seq > 1 && owner[seq] != owner[seq-1] {
			switches++
		}
	}
	if switches < 2 {
		t.Fatalf("the writers' batches never interleaved (%d switches): the test did not exercise contention", switches)
	}
	v := openStore(t, db.RuntimePool(t), "", 1000)
	res, err := v.Verify(ctx, audit.VerifyOptions{Keys: testKeys()})
	if err != nil || res.Events != total {
		t.Fatalf("verify: %+v %v, want %d events", res, err, total)
	}
	if _, err := v.VerifyTree(ctx); err != nil {
		t.Fatalf("tree: %v", err)
	}
	t.Logf("%d switches between writers", switches)
}
