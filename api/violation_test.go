//go:build faults

package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/node/platformtest"
)

func newPlatform(t *testing.T) *platform {
	p := platformtest.New(t, platformtest.Options{PlaceholderOver: 64})
	return &platform{Platform: p, srvURL: p.URL}
}

// An isolation violation ends the response with an error — never a 200 or a
// normal finish — ledgers isolation.violation and opens a Loi 25 incident
// with the tenant and the withheld response pre-filled.
func TestIsolationViolationFailsClosed(t *testing.T) {
	p := newPlatform(t)
	short := `{"model":"cloison-context-bag","prompt":"abc","max_tokens":3,"temperature":0}`
	if resp := p.post(t, "victim", short); resp.StatusCode != 200 {
		t.Fatalf("a normal request: %d", resp.StatusCode)
	}
	long := `{"model":"cloison-context-bag","prompt":"` + strings.Repeat("xy", 60) + `","max_tokens":4,"temperature":0}`
	// Not streamed: an error status, no completion body.
	resp := p.post(t, "attacker", long)
	var body api.ErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 500 || body.Error.Code != string(cloison.CodeIsolationViolation) {
		t.Fatalf("got %d %+v, want 500 isolation_violation", resp.StatusCode, body)
	}
	// Streamed: an error event, no finish reason, no [DONE].
	resp = p.post(t, "attacker", strings.Replace(long, `"temperature":0`, `"temperature":0,"stream":true`, 1))
	sc := bufio.NewScanner(resp.Body)
	var sawErr, sawFinish, sawDone bool
	for sc.Scan() {
		line := sc.Text()
		sawErr = sawErr || strings.Contains(line, `"code":"isolation_violation"`)
		sawFinish = sawFinish || strings.Contains(line, `"finish_reason":"`)
		sawDone = sawDone || line == "data: [DONE]"
	}
	if !sawErr || sawFinish || sawDone {
		t.Fatalf("stream: error %v, finish %v, done %v; want only an error", sawErr, sawFinish, sawDone)
	}
	// Two violations of one cause: one incident, opened in the background by
	// the hook, listing both requests (detections of one cause are grouped, so
	// that one breach is one register entry).
	var incs []audit.IncidentFile
	testwait.Eventually(t, 20*time.Second, func() bool {
		var err error
		if incs, err = p.Ledger.Incidents(context.Background()); err != nil {
			t.Fatal(err)
		}
		return len(incs) == 1 && incs[0].Latest().Detections == 2
	}, "one incident with both detections (%s)", testwait.Lazy(func() string { return fmt.Sprint(len(incs), " incidents") }))
	if len(incs) != 1 {
		t.Fatalf("got %d incidents, want 1", len(incs))
	}
	for _, f := range incs {
		v := f.Latest()
		if f.Source != audit.SourceIsolationViolation || v.Assessment.Status != audit.AssessmentPending || v.AffectedResponses != 2 ||
			len(v.AffectedTenants) == 0 || v.AffectedTenants[0] != "attacker" || len(v.LedgerEvents) != 2 || len(v.AffectedRequests) != 2 || len(f.Versions) != 2 {
			t.Fatalf("incident %s: %+v", f.ID, v)
		}
	}
	// The ledger holds the violations (counts and ids, no text) and no
	// completion for them.
	kinds := map[audit.Kind]int{}
	if err := p.Ledger.Scan(context.Background(), 1, 0, func(r audit.Record) error {
		kinds[r.Kind]++
		if bytes.Contains(r.Payload, []byte("xyxy")) {
			t.Fatalf("prompt text in the ledger: %s", r.Payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if kinds[audit.KindIsolationViolation] != 2 || kinds[audit.KindIncidentOpened] != 1 || kinds[audit.KindIncidentUpdated] != 1 {
		t.Fatalf("ledger kinds %v", kinds)
	}
}

// A refused transfer (the decode node's OnVerificationFailed hook) is
// ledgered as transfer.verification_failed and opens an incident with the
// tenant and the withheld response pre-filled.
func TestTransferFailureRecorded(t *testing.T) {
	p := newPlatform(t)
	p.Server.RecordTransferFailure(transfer.Failure{Time: time.Now(), Lease: isolation.Lease{Tenant: "victim", Request: "req-t1", Epoch: 7},
		Reason: transfer.Reason("token-count")})
	var incs []audit.IncidentFile
	testwait.Eventually(t, 20*time.Second, func() bool { incs, _ = p.Ledger.Incidents(context.Background()); return len(incs) > 0 }, "the transfer failure's incident")
	if len(incs) != 1 || incs[0].Source != audit.SourceTransferFailure {
		t.Fatalf("incidents %+v", incs)
	}
	v := incs[0].Latest()
	if len(v.AffectedTenants) != 1 || v.AffectedTenants[0] != "victim" || v.AffectedResponses != 1 || v.Assessment.Status != audit.AssessmentPending {
		t.Fatalf("incident version %+v", v)
	}
	found := false
	p.Ledger.Scan(context.Background(), 1, 0, func(r audit.Record) error {
		found = found || (r.Kind == audit.KindTransferVerification && r.Tenant == "victim")
		return nil
	})
	if !found {
		t.Fatal("no transfer.verification_failed event")
	}
}
