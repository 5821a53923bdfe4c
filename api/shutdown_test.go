package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/node/platformtest"
)

// Incident writes are tracked, so that no incident is lost at shutdown: Close
// returns only once every incident reported before it is in the register — no
// polling, the rows are there when Close returns — and one reported after
// Close is written before its hook returns.
func TestCloseWaitsForIncidents(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{}) // every defence on
	const n = 6
	for i := range n {
		p.Server.RecordIncident(engine.Incident{Time: time.Now(), Tenant: "victim", Request: cloison.RequestID(fmt.Sprint("req-i", i)),
			Kind: "pool-violation", Reason: "unwritten"})
		p.Server.RecordTransferFailure(transfer.Failure{Time: time.Now(), Lease: isolation.Lease{Tenant: "victim", Request: cloison.RequestID(fmt.Sprint("req-t", i)), Epoch: 7},
			Reason: transfer.ReasonTokenCount})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Server.Close(ctx); err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
	// Detections of one cause are grouped into one entry: count the
	// requests the entries list, not the entries.
	count := func() (iso, xfer int) {
		incs, err := p.Ledger.Incidents(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range incs {
			switch in.Source {
			case audit.SourceIsolationViolation:
				iso += len(in.Latest().AffectedRequests)
			case audit.SourceTransferFailure:
				xfer += len(in.Latest().AffectedRequests)
			}
		}
		return iso, xfer
	}
	if iso, xfer := count(); iso != n || xfer != n {
		t.Fatalf("after Close: got %d isolation and %d transfer requests in the register, want %d and %d", iso, xfer, n, n)
	}
	p.Server.RecordTransferFailure(transfer.Failure{Time: time.Now(), Lease: isolation.Lease{Tenant: "victim", Request: "req-late", Epoch: 9},
		Reason: transfer.ReasonDigest})
	if _, xfer := count(); xfer != n+1 {
		t.Fatalf("after a report past Close: got %d transfer requests in the register, want %d", xfer, n+1)
	}
}
