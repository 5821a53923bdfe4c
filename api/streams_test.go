package api

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloison/cloison"
)

// Compliance streams are capped per tenant and per node, refused at once
// past either cap, and a slot comes back when a stream ends, so
// that no tenant can hold every compliance connection of the node; the
// operator's reserved slots stay free of tenants' streams.
func TestStreamGateCaps(t *testing.T) {
	g := newComplianceGate(StreamLimits{Max: 4, PerTenant: 2, Reserved: 1})
	steps := []struct {
		tenant   cloison.TenantID
		operator bool
		want     error
	}{
		{"a", false, nil}, {"a", false, nil}, {"a", false, ErrTooManyComplianceStreams}, // per-tenant cap
		{"b", false, nil}, {"c", false, ErrTooManyComplianceStreams}, // the tenants' share of the node
		{"ops", true, nil},                         // the operator's reserved slot
		{"ops", true, ErrTooManyComplianceStreams}, // node cap
	}
	var releases []func()
	for i, s := range steps {
		release, err := g.acquire(s.tenant, s.operator)
		if !errors.Is(err, s.want) {
			t.Fatalf("step %d (%s): got %v, want %v", i, s.tenant, err, s.want)
		}
		if d := cloison.RetryAfter(err); err != nil && d != time.Second {
			t.Fatalf("step %d (%s): a refusal with a retry hint of %v, want 1s (Retry-After)", i, s.tenant, d)
		}
		if err == nil {
			releases = append(releases, release)
		}
	}
	releases[0]()               // one of a's ends
	releases[0]()               // a second call is a no-op
	releases[len(releases)-1]() // the operator's ends
	if _, err := g.acquire("c", false); err != nil {
		t.Errorf("after a release: got %v, want a slot", err)
	}
	if _, err := g.acquire("a", false); !errors.Is(err, ErrTooManyComplianceStreams) {
		t.Errorf("node full again: got %v, want %v", err, ErrTooManyComplianceStreams)
	}
}

// A send that does not return within the send timeout is cut off with
// ErrSlowReader; one that returns is passed through.
func TestStreamGateSendWithin(t *testing.T) {
	g := newComplianceGate(StreamLimits{SendTimeout: time.Second})
	block := make(chan struct{})
	defer close(block)
	for _, tc := range []struct {
		name string
		send func() error
		want error
	}{
		{"returns", func() error { return nil }, nil},
		{"fails", func() error { return context.Canceled }, context.Canceled},
		{"blocks", func() error { <-block; return nil }, ErrSlowReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := g.sendWithin(context.Background(), tc.send); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}
