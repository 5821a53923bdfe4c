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
// that no tenant can hold every compliance connection of the node.
func TestStreamGateCaps(t *testing.T) {
	g := newComplianceGate(StreamLimits{Max: 3, PerTenant: 2})
	steps := []struct {
		tenant cloison.TenantID
		want   error
	}{
		{"a", nil}, {"a", nil}, {"a", ErrTooManyComplianceStreams}, // per-tenant cap
		{"b", nil}, {"c", ErrTooManyComplianceStreams}, // node cap
	}
	var releases []func()
	for i, s := range steps {
		release, err := g.acquire(s.tenant)
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
	releases[0]() // one of a's ends
	releases[0]() // a second call is a no-op
	if _, err := g.acquire("c"); err != nil {
		t.Errorf("after a release: got %v, want a slot", err)
	}
	if _, err := g.acquire("a"); !errors.Is(err, ErrTooManyComplianceStreams) {
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
