package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/tracing"
)

// fakeLedger is a Recorder in memory whose writes fail while down is set.
type fakeLedger struct {
	mu        sync.Mutex
	down      bool
	events    []audit.Event
	opened    []audit.Detection
	failOpen  int  // OpenFromDetection calls to fail before succeeding
	noReceipt bool // Receipt fails
}

func (l *fakeLedger) write(e audit.Event) (audit.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return audit.Record{}, errors.New("ledger down")
	}
	l.events = append(l.events, e)
	return audit.Record{Seq: uint64(len(l.events)), Kind: e.Kind(), Tenant: e.Tenant}, nil
}

func (l *fakeLedger) Append(_ context.Context, e audit.Event) (audit.Record, error) {
	return l.write(e)
}
func (l *fakeLedger) Stage(_ context.Context, e audit.Event) (audit.Record, error) { return l.write(e) }
func (l *fakeLedger) Head(context.Context) (audit.Head, error)                     { return audit.Head{}, nil }
func (l *fakeLedger) Receipt(rec audit.Record, req cloison.RequestID) (string, error) {
	if l.noReceipt {
		return "", errors.New("no log key")
	}
	return "receipt:" + string(req), nil
}
func (l *fakeLedger) OpenFromDetection(_ context.Context, _ audit.Name, d audit.Detection) (audit.Name, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failOpen > 0 {
		l.failOpen--
		return "", errors.New("register down")
	}
	l.opened = append(l.opened, d)
	return "inc-1", nil
}

// countingObserver counts ledger errors and lost incident writes.
type countingObserver struct {
	NopObserver
	mu                   sync.Mutex
	ledgerErrors, losses int
	isolation            []string
}

func (o *countingObserver) OnLedgerError() { o.mu.Lock(); o.ledgerErrors++; o.mu.Unlock() }
func (o *countingObserver) OnIncidentWriteLost() {
	o.mu.Lock()
	o.losses++
	o.mu.Unlock()
}
func (o *countingObserver) OnIsolationFailure(t cloison.TenantID, kind string) {
	o.mu.Lock()
	o.isolation = append(o.isolation, string(t)+"/"+kind)
	o.mu.Unlock()
}

// newTestRequests is Requests over l alone: enough for refusals, incidents
// and the ledger, which need neither engine nor policy.
func newTestRequests(l *fakeLedger, obs Observer) *Requests {
	return &Requests{cfg: Config{Ledger: l, Node: "node-1", ModelName: "m", LedgerTimeout: time.Second},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), tracer: tracing.Tracer(nil), obs: obs, shared: &shared{incOpen: map[cloison.RequestID]bool{}}}
}

// Refusals are counted per tenant, stage and code; a flush the ledger
// refuses keeps every count for the next one, which writes one
// policy.refusals per tenant with the counts sorted by stage and code.
func TestRefusalsKeptAcrossFailedFlush(t *testing.T) {
	l := &fakeLedger{down: true}
	obs := &countingObserver{}
	s := newTestRequests(l, obs)
	quota := cloison.NewError(cloison.CodeRateLimited, "quota")
	denied := cloison.NewError(cloison.CodePermissionDenied, "denied")
	if err := s.Refuse("b", StageQuota, quota); err != quota {
		t.Fatalf("Refuse returned %v, want the error unchanged", err)
	}
	s.Refuse("a", StagePolicy, denied)
	s.Refuse("a", StagePolicy, denied)
	s.Refuse("a", StageCapacity, quota)
	if got := s.PendingRefusals(); got != 4 {
		t.Fatalf("pending %d, want 4", got)
	}
	if err := s.FlushRefusals(context.Background()); !errors.Is(err, ErrLedgerUnavailable) {
		t.Fatalf("flush with the ledger down: got %v, want ErrLedgerUnavailable", err)
	}
	if got := s.PendingRefusals(); got != 4 {
		t.Fatalf("pending after a failed flush %d, want 4 (no count lost)", got)
	}
	if obs.ledgerErrors != 1 {
		t.Fatalf("ledger errors observed %d, want 1", obs.ledgerErrors)
	}
	l.down = false
	if err := s.FlushRefusals(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.PendingRefusals(); got != 0 {
		t.Fatalf("pending after a flush %d, want 0", got)
	}
	if len(l.events) != 2 || l.events[0].Tenant != "a" || l.events[1].Tenant != "b" {
		t.Fatalf("got %d events, want one per tenant in tenant order", len(l.events))
	}
	a := l.events[0].Payload.(audit.PolicyRefusals)
	if a.Total != 3 || len(a.Counts) != 2 || a.Counts[0].Stage != StageCapacity || a.Counts[1].Stage != StagePolicy || a.Counts[1].Count != 2 {
		t.Fatalf("tenant a's summary %+v", a)
	}
}

// An isolation incident is ledgered once and its register entry opened
// even when the register first refuses (retried, the event not appended
// twice); a second report of the same request opens nothing; Close returns
// once it is durable. The retries' backoff runs on a synctest bubble's
// clock, at its real pacing.
func TestIncidentDurableOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLedger{failOpen: 2}
		obs := &countingObserver{}
		s := newTestRequests(l, obs)
		in := engine.Incident{Time: time.Now(), Tenant: "victim", Request: "req-1", Kind: "pool-violation", Reason: "page 3 owned by another lease"}
		s.RecordIncident(in)
		s.RecordIncident(in)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if len(l.events) != 1 || l.events[0].Kind() != audit.KindIsolationViolation {
			t.Fatalf("got %d events, want one isolation.violation", len(l.events))
		}
		if len(l.opened) != 1 || l.opened[0].LedgerEvents[0] != 1 || l.opened[0].Source != audit.SourceIsolationViolation {
			t.Fatalf("opened %+v, want one entry naming seq 1", l.opened)
		}
		if len(obs.isolation) != 2 || obs.losses != 0 {
			t.Fatalf("observed isolation %v and %d losses, want two reports and none lost", obs.isolation, obs.losses)
		}
	})
}

// Close gives up on a write the ledger never takes: ErrIncidentsPending,
// and the loss is observed.
func TestIncidentLostAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLedger{down: true}
		obs := &countingObserver{}
		s := newTestRequests(l, obs)
		s.RecordIncident(engine.Incident{Time: time.Now(), Tenant: "victim", Request: "req-2", Kind: "pool-violation"})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := s.Close(ctx); !errors.Is(err, ErrIncidentsPending) {
			t.Fatalf("got %v, want ErrIncidentsPending", err)
		}
		if obs.losses != 1 {
			t.Fatalf("losses observed %d, want 1", obs.losses)
		}
	})
}

func TestSanitizeName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"pool-violation:page 3", "pool-violation:page_3"},
		{"10.0.0.1:9000", "10.0.0.1:9000"},
		{"é", "__"},
	} {
		if got := SanitizeName(c.in); got != c.want {
			t.Errorf("SanitizeName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := len(SanitizeName(string(make([]byte, audit.MaxNameLen+10)))); got != audit.MaxNameLen {
		t.Errorf("length %d, want %d", got, audit.MaxNameLen)
	}
}
