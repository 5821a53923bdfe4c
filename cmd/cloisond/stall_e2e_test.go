package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/tenancy"
)

// Compliance streams whose clients stop reading must not
// stall the request path. Before the fix, LedgerRange scanned in one
// REPEATABLE READ transaction on the only pool, so as many stalled streams
// as the pool had connections (pgxpool's default, max(4, NumCPU)) held
// every connection: every tenant's requests failed with 503 and /readyz
// answered 503. Now scans run on their own pool, page through keyset
// queries holding no connection while a client reads, are capped per
// tenant and per node, and are cut off by a send deadline.
func TestE2ELedgerStreamsDoNotStallRequests(t *testing.T) {
	db := pgtest.New(t)
	stalled := max(4, runtime.NumCPU()) // the old pool's size
	// Through the environment, so that a cloisond without these flags
	// still starts (and shows the stall).
	t.Setenv("CLOISON_DB_MAX_CONNS", "4")
	t.Setenv("CLOISON_DB_SCAN_CONNS", "1")
	// Two of the node's slots are the operator's (--operator-compliance-streams).
	t.Setenv("CLOISON_MAX_COMPLIANCE_STREAMS", fmt.Sprint(stalled+1+2))
	t.Setenv("CLOISON_MAX_COMPLIANCE_STREAMS_PER_TENANT", fmt.Sprint(stalled))
	t.Setenv("CLOISON_STREAM_SEND_TIMEOUT", "2s")
	n := startNode(t, db.AdminURL, pgtestRoles())
	createTenant(t, db.AdminURL, "mallory", nil)
	createTenant(t, db.AdminURL, "acme", nil)

	// Enough of mallory's rows that a stream cannot be sent whole into the
	// client's flow-control window and the server's write quota (64 KiB
	// each): the server's Send blocks once the client stops reading.
	const rows = 3000
	fill(t, db.AdminURL, "mallory", rows)

	mallory := n.token("mallory", time.Hour, tenancy.ScopeComplianceRead)
	open := func(ctx context.Context) (compliancev1.ComplianceService_LedgerRangeClient, error) {
		// One connection per stream, with a fixed 64 KiB window (no
		// BDP growth): the stream's window fills after about 64 KiB.
		conn, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { conn.Close() })
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+mallory)
		return compliancev1.NewComplianceServiceClient(conn).LedgerRange(ctx, &compliancev1.LedgerRangeRequest{})
	}
	streamCtx, cancelStreams := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelStreams()
	var streams []compliancev1.ComplianceService_LedgerRangeClient
	for i := 0; i < stalled; i++ {
		s, err := open(streamCtx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil { // one row, then stop reading
			t.Fatalf("stream %d: first row: %v", i, err)
		}
		streams = append(streams, s)
	}

	// Past the per-tenant cap: refused at once, not queued (the bound only
	// keeps a queued stream from hanging the test).
	extraCtx, cancelExtra := context.WithTimeout(streamCtx, 10*time.Second)
	defer cancelExtra()
	extra, err := open(extraCtx)
	if err == nil {
		_, err = extra.Recv()
	}
	if got := status.Code(err); got != codes.ResourceExhausted {
		t.Errorf("stream past the per-tenant cap: got %v (%v), want %v", got, err, codes.ResourceExhausted)
	}

	// Every other tenant is still served, and the node is ready. (Before
	// the fix the completion waited for a connection until the streams
	// ended; the client's bound keeps that from hanging the test.)
	acme := n.token("acme", time.Hour, tenancy.ScopeInfer, tenancy.ScopeComplianceRead)
	req, _ := http.NewRequest("POST", n.base+"/v1/completions", bytes.NewReader(completion("abc", 2, false)))
	req.Header.Set("Authorization", "Bearer "+acme)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("acme's completion while mallory's streams stall: got %v, want 200", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("acme's completion while mallory's streams stall: got %d %s, want 200", resp.StatusCode, body)
	}
	if r := n.do("GET", "/readyz", "", nil); r.status != 200 {
		t.Fatalf("readyz while mallory's streams stall: got %d %s, want 200", r.status, r.body)
	}
	if got := ledgerRange(t, n.grpc(), acme); len(got) == 0 {
		t.Errorf("acme's ledger range while mallory's streams stall: got %d rows, want its own", len(got))
	}

	// The stalled streams are cut off by the send deadline: their slots
	// come back (as many new streams of mallory's as were stalled are
	// admitted at once), and each stalled client, reading again, finds its
	// stream ended with DEADLINE_EXCEEDED before all its rows.
	probeCtx, cancelProbes := context.WithCancel(streamCtx)
	admitted := 0
	testwait.Eventually(t, time.Minute, func() bool {
		s, err := open(probeCtx)
		if err == nil {
			_, err = s.Recv()
		}
		if err == nil {
			admitted++ // left open: it holds its slot until cancelProbes
		}
		return admitted == stalled
	}, "the stalled streams to be cut off")
	cancelProbes()
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := 1
			for {
				_, err := s.Recv()
				if errors.Is(err, io.EOF) {
					t.Errorf("stalled stream %d: read to the end (%d rows), want it cut off", i, got)
					return
				}
				if err != nil {
					if status.Code(err) != codes.DeadlineExceeded || got >= rows {
						t.Errorf("stalled stream %d: got %v after %d rows, want %v before %d", i, err, got, codes.DeadlineExceeded, rows)
					}
					return
				}
				got++
			}
		}()
	}
	wg.Wait()
}

// fill appends n small events of tenant to the ledger through a second
// Store on the same database (several Stores may share one ledger).
func fill(t *testing.T, url string, tenant cloison.TenantID, n int) {
	t.Helper()
	ctx := context.Background()
	s, err := auditpg.Open(ctx, adminPool(t, url), auditpg.Config{Origin: "fill"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				_, err := s.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: tenant, Actor: "e2e-fill", Payload: audit.RequestCompleted{
					Request: cloison.RequestID(fmt.Sprintf("req-fill-%06d", i)), Model: modelID, PromptTokens: 3, CompletionTokens: 2, Pages: 1, Tier: "cross-tenant"}})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
