package isolation

import (
	"errors"
	"testing"
)

// Verified transfer (defence layer 4): a receiver stages transferred
// KV through a StagingTable and records it with Write only after verifying.
// Until then nothing can read the staged slots, and a lease that ends with
// staged slots unrecorded is scrubbed whatever its zeroing mode (layer 5).
func TestStagingTable(t *testing.T) {
	tests := []struct {
		name    string
		zeroing Zeroing
		tokens  int // lease size
		stage   int // staging table size
		commit  int // slots recorded with Write after staging; -1: none
		end     func(*Pool, Lease) error
		scrub   int // pages ScrubWork must return after the lease ends
	}{
		{name: "verified then released, never mode", zeroing: ZeroNever, tokens: 40, stage: 40, commit: 40, end: (*Pool).Release, scrub: 0},
		{name: "unverified then released, never mode", zeroing: ZeroNever, tokens: 40, stage: 40, commit: -1, end: (*Pool).Release, scrub: 3},
		{name: "partly recorded then released, never mode", zeroing: ZeroNever, tokens: 40, stage: 33, commit: 16, end: (*Pool).Release, scrub: 3},
		{name: "unverified then released, cross-tenant mode", zeroing: ZeroCrossTenant, tokens: 64, stage: 17, commit: -1, end: (*Pool).Release, scrub: 4},
		{name: "verified then released, cross-tenant mode (affine)", zeroing: ZeroCrossTenant, tokens: 32, stage: 32, commit: 32, end: (*Pool).Release, scrub: 0},
		{name: "verification failed: discarded", zeroing: ZeroNever, tokens: 48, stage: 48, commit: -1, end: (*Pool).Discard, scrub: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t, Config{Pages: 4, PageTokens: 16, DefaultZeroing: tt.zeroing}, TenantConfig{ID: "a"})
			l, err := p.Allocate("a", "r", tt.tokens)
			if err != nil {
				t.Fatal(err)
			}
			bt, err := p.StagingTable(l, tt.stage)
			if err != nil {
				t.Fatal(err)
			}
			if !bt.Staged() || bt.Tokens() != tt.stage || bt.Len() != (tt.stage+15)/16 || bt.Lease() != l {
				t.Fatalf("got staged %v, %d tokens, %d pages, lease %s; want staged, %d tokens, %d pages, %s", bt.Staged(), bt.Tokens(), bt.Len(), bt.Lease(), tt.stage, (tt.stage+15)/16, l)
			}
			for i := range bt.Len() {
				if !bt.Writable(i) || bt.Tag(i) != (Tag{Tenant: 1, Epoch: l.Epoch}) {
					t.Fatalf("page %d: writable %v tag %+v, want writable with the lease's tag", i, bt.Writable(i), bt.Tag(i))
				}
			}
			mustCheck(t, p)
			// Nothing staged is readable before Write records it.
			var v *ViolationError
			if _, err := p.BlockTable(l, 1); !errors.As(err, &v) || v.Reason != ReasonUnwritten {
				t.Fatalf("read of a staged slot: got %v, want an unwritten-slot violation", err)
			}
			if n, _ := p.Written(l); n != 0 {
				t.Fatalf("got %d slots written after staging, want 0", n)
			}
			if tt.commit >= 0 {
				if err := p.Write(l, tt.commit); err != nil {
					t.Fatal(err)
				}
				if _, err := p.BlockTable(l, tt.commit); err != nil {
					t.Fatalf("read after Write: %v", err)
				}
				if _, err := p.StagingTable(l, tt.stage); !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("staging over written slots: got %v, want ErrInvalidArgument", err)
				}
			}
			mustCheck(t, p)
			if err := tt.end(p, l); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, p)
			if work := scrubAll(t, p); len(work) != tt.scrub {
				t.Fatalf("got %d pages to scrub, want %d", len(work), tt.scrub)
			}
			if _, err := p.StagingTable(l, tt.stage); !errors.Is(err, ErrStaleLease) {
				t.Fatalf("staging into an ended lease: got %v, want ErrStaleLease", err)
			}
			mustCheck(t, p)
		})
	}
}

func TestStagingTableRefuses(t *testing.T) {
	p := newPool(t, Config{Pages: 8, PageTokens: 4}, TenantConfig{ID: "a"})
	prompt := seq(12, 0)
	l1, _, _ := p.AllocatePrefix("a", "r1", 12, prompt)
	p.Write(l1, 12)
	if n, _ := p.Publish(l1, prompt); n != 3 {
		t.Fatalf("published %d pages, want 3", n)
	}
	l2, cached, err := p.AllocatePrefix("a", "r2", 16, append(prompt, 99))
	if err != nil || cached != 12 {
		t.Fatalf("got %d cached, %v; want 12 cached", cached, err)
	}
	tests := []struct {
		name   string
		lease  Lease
		tokens int
		want   error
	}{
		{"no new slot", l2, 12, ErrInvalidArgument},
		{"past the lease", l2, 17, ErrInvalidArgument},
		{"written lease", l1, 12, ErrInvalidArgument},
		{"stale lease", Lease{Tenant: "a", Request: "r2", Epoch: l2.Epoch + 10}, 12, ErrStaleLease},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := snapshot(p)
			if _, err := p.StagingTable(tt.lease, tt.tokens); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if after := snapshot(p); len(after) != len(before) || !equalPages(before, after) {
				t.Fatal("a refused StagingTable changed page state")
			}
		})
	}
	// Prefix pages stay read-only in a staging table: only the suffix is
	// copied in.
	bt, err := p.StagingTable(l2, 16)
	if err != nil {
		t.Fatal(err)
	}
	for i := range bt.Len() {
		if want := i >= 3; bt.Writable(i) != want {
			t.Fatalf("page %d writable %v, want %v", i, bt.Writable(i), want)
		}
	}
	if err := p.Write(l2, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := p.BlockTable(l2, 16); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, p)
}

func equalPages(a, b []page) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
