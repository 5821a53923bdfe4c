package isolation

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cloison/cloison"
	"pgregory.net/rapid"
)

// fataler is what the machine needs of *testing.T and *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// machine drives a Pool with random operations and keeps an independent
// shadow of the KV arena: for every page slot, which lease last wrote it
// (as a real arena would hold it). After every step it asserts:
//   - Check() passes (the pool's own books are consistent);
//   - no approved read covers a slot whose last writer is another tenant
//     (outside a shared namespace) or an older epoch of the reader;
//   - no page reaches another tenant with data of a tenant whose zeroing
//     mode forbids it, and in always mode not even its own tenant;
//   - failed allocations change nothing.
type machine struct {
	t      fataler
	draw   func(n int, label string) int
	p      *Pool
	cfgs   []TenantConfig
	mode   map[cloison.TenantID]Zeroing
	ns     map[cloison.TenantID]string
	arena  [][]writer // shadow KV: per page, per slot
	leases []liveLease
	holds  []HoldID
	reqs   int
	prompt [][]int32 // a few shared prompt stems, so prefix hits happen
	pt     int
}

type writer struct {
	tenant cloison.TenantID
	epoch  uint64
	staged bool // copied in through a StagingTable, not recorded by Write
}

type liveLease struct {
	l      Lease
	prompt []int32
	slots  int // reserved slots as the shadow believes
}

func newMachine(t fataler, draw func(n int, label string) int) *machine {
	m := &machine{t: t, draw: draw, mode: map[cloison.TenantID]Zeroing{}, ns: map[cloison.TenantID]string{}}
	m.pt = 1 << draw(4, "pageTokenShift") // 1, 2, 4 or 8
	pages := 8 + draw(40, "pages")
	def := Zeroing(1 + draw(3, "defaultZeroing"))
	p, err := NewPool(Config{Pages: pages, PageTokens: m.pt, DefaultZeroing: def, PrefixSecret: []byte("k"), SharedNamespaces: []string{"public"}})
	if err != nil {
		t.Fatal(err)
	}
	m.p = p
	m.arena = make([][]writer, pages)
	for i := range m.arena {
		m.arena[i] = make([]writer, m.pt)
	}
	// At least 8 tenants, of every tier and mode.
	reservedLeft := pages / 2
	for i := range 8 + draw(3, "extraTenants") {
		tc := TenantConfig{ID: cloison.TenantID(fmt.Sprintf("t%d", i)), Zeroing: Zeroing(draw(4, "zeroing"))}
		switch draw(6, "kind") {
		case 0:
			if reservedLeft >= 2 {
				tc.Tier, tc.Reserved = TierDedicated, 1+draw(min(3, reservedLeft), "dedicated")
				reservedLeft -= tc.Reserved
			}
		case 1:
			if reservedLeft >= 1 {
				tc.Reserved = draw(min(3, reservedLeft)+1, "reserved")
				reservedLeft -= tc.Reserved
			}
		case 2:
			tc.Cap = 2 + draw(6, "cap")
		case 3:
			tc.Namespace = "public"
		}
		if err := p.AddTenant(tc); err != nil {
			t.Fatalf("AddTenant(%+v): %v", tc, err)
		}
		m.cfgs = append(m.cfgs, tc)
		m.mode[tc.ID] = max(def, tc.Zeroing)
		m.ns[tc.ID] = tc.Namespace
	}
	for i := range 3 {
		m.prompt = append(m.prompt, seq(6*m.pt, int32(100*i)))
	}
	return m
}

func (m *machine) run(steps int) {
	for range steps {
		m.step()
		if err := m.p.Check(); err != nil {
			m.t.Fatal(err)
		}
	}
}

func (m *machine) pickLease() (int, bool) {
	if len(m.leases) == 0 {
		return 0, false
	}
	return m.draw(len(m.leases), "lease"), true
}

func (m *machine) step() {
	switch m.draw(10, "op") {
	case 9:
		m.stage()
	case 0, 1:
		m.allocate()
	case 2:
		if i, ok := m.pickLease(); ok {
			ll := &m.leases[i]
			want := ll.slots + 1 + m.draw(3*m.pt, "extend")
			if err := m.p.Extend(ll.l, want); err == nil {
				ll.slots = (want + m.pt - 1) / m.pt * m.pt
				m.checkNewPages(ll.l)
			} else if !transient(err) && !errors.Is(err, ErrTooLarge) {
				m.t.Fatalf("Extend: %v", err)
			}
		}
	case 3, 4:
		m.write()
	case 5:
		m.read()
	case 6:
		if i, ok := m.pickLease(); ok {
			if m.draw(8, "stale") == 0 {
				stale := m.leases[i].l
				stale.Epoch += 1 << 40
				if err := m.p.Release(stale); !errors.Is(err, ErrStaleLease) {
					m.t.Fatalf("Release of a stale lease: got %v", err)
				}
				return
			}
			release := m.p.Release
			if m.draw(4, "discard") == 0 {
				release = m.p.Discard
			}
			if err := release(m.leases[i].l); err != nil {
				m.t.Fatalf("Release: %v", err)
			}
			m.leases = append(m.leases[:i], m.leases[i+1:]...)
		}
	case 7:
		work := m.p.ScrubWork()
		for _, pg := range work {
			clear(m.arena[pg]) // the driver zeroes BEFORE confirming
		}
		if err := m.p.ConfirmScrub(work); err != nil {
			m.t.Fatalf("ConfirmScrub: %v", err)
		}
	case 8:
		switch {
		case len(m.holds) > 0 && m.draw(2, "unhold") == 0:
			i := m.draw(len(m.holds), "hold")
			if err := m.p.Unhold(m.holds[i]); err != nil {
				m.t.Fatalf("Unhold: %v", err)
			}
			m.holds = append(m.holds[:i], m.holds[i+1:]...)
		default:
			if i, ok := m.pickLease(); ok {
				if m.draw(2, "publish") == 0 {
					if _, err := m.p.Publish(m.leases[i].l, m.leases[i].prompt); err != nil {
						m.t.Fatalf("Publish: %v", err)
					}
					return
				}
				h, err := m.p.Hold(m.leases[i].l)
				if err != nil {
					m.t.Fatalf("Hold: %v", err)
				}
				m.holds = append(m.holds, h)
			}
		}
	}
}

func transient(err error) bool {
	return errors.Is(err, ErrPoolExhausted) || errors.Is(err, ErrScrubPending) || errors.Is(err, ErrQuotaExceeded)
}

func (m *machine) allocate() {
	tc := m.cfgs[m.draw(len(m.cfgs), "tenant")]
	m.reqs++
	req := cloison.RequestID(fmt.Sprintf("r%d", m.reqs))
	var prompt []int32
	if m.draw(2, "withPrompt") == 0 {
		stem := m.prompt[m.draw(len(m.prompt), "stem")]
		prompt = append([]int32(nil), stem[:1+m.draw(len(stem), "stemLen")]...)
		for range m.draw(2*m.pt, "suffix") {
			prompt = append(prompt, int32(m.draw(1000, "tok")))
		}
	}
	tokens := max(len(prompt), 1) + m.draw(4*m.pt, "extra")
	before := snapshot(m.p)
	l, cached, err := m.p.AllocatePrefix(tc.ID, req, tokens, prompt)
	if err != nil {
		if !transient(err) && !errors.Is(err, ErrTooLarge) {
			m.t.Fatalf("Allocate: %v", err)
		}
		if !reflect.DeepEqual(before, snapshot(m.p)) {
			m.t.Fatalf("failed allocation (%v) changed page state", err)
		}
		return
	}
	if cached%m.pt != 0 || cached >= max(len(prompt), 1) && cached != 0 {
		m.t.Fatalf("cached %d tokens of a %d-token prompt", cached, len(prompt))
	}
	// Cached slots must already hold exactly this prompt's prefix, written
	// by a lease of the same namespace.
	pages := leasePages(m.p, l)
	for i := range cached / m.pt {
		for s, w := range m.arena[pages[i]] {
			if w.tenant == "" || !m.sameNamespace(w.tenant, tc.ID) {
				m.t.Fatalf("prefix page %d slot %d written by %q, attached to %s", pages[i], s, w.tenant, tc.ID)
			}
		}
	}
	m.leases = append(m.leases, liveLease{l: l, prompt: prompt, slots: (tokens + m.pt - 1) / m.pt * m.pt})
	m.checkNewPages(l)
}

func (m *machine) sameNamespace(a, b cloison.TenantID) bool {
	return a == b || (m.ns[a] != "" && m.ns[a] == m.ns[b])
}

// checkNewPages asserts that the lease's own unwritten pages carry no data
// that their writer's zeroing mode forbids handing to this tenant.
func (m *machine) checkNewPages(l Lease) {
	m.p.mu.Lock()
	ls := m.p.leases[l.Epoch]
	own := append([]int32(nil), ls.pages[ls.readOnly:]...)
	written := ls.written - ls.readOnly*m.pt
	m.p.mu.Unlock()
	for i, pg := range own {
		if (i+1)*m.pt <= written {
			continue
		}
		for _, w := range m.arena[pg] {
			if w.staged && w.epoch != l.Epoch {
				m.t.Fatalf("page %d reached %s holding unverified staged bytes of %s@%d unscrubbed", pg, l, w.tenant, w.epoch)
			}
			if w.tenant == "" || w.tenant == l.Tenant && w.epoch == l.Epoch {
				continue
			}
			switch mode := m.mode[w.tenant]; {
			case mode == ZeroAlways:
				m.t.Fatalf("page %d reached %s holding data of %s (always mode) unscrubbed", pg, l, w.tenant)
			case mode == ZeroCrossTenant && w.tenant != l.Tenant:
				m.t.Fatalf("page %d reached %s holding data of %s (cross-tenant mode) unscrubbed", pg, l, w.tenant)
			}
		}
	}
}

func (m *machine) write() {
	i, ok := m.pickLease()
	if !ok {
		return
	}
	ll := &m.leases[i]
	from, err := m.p.Written(ll.l)
	if err != nil {
		m.t.Fatalf("Written: %v", err)
	}
	n := m.draw(2*m.pt+1, "n")
	err = m.p.Write(ll.l, n)
	if from+n > ll.slots {
		if !errors.Is(err, ErrLeaseOverflow) {
			m.t.Fatalf("write past %d slots: got %v, want ErrLeaseOverflow", ll.slots, err)
		}
		return
	}
	if err != nil {
		m.t.Fatalf("Write: %v", err)
	}
	if from+n == 0 {
		return
	}
	// The kernel writes the new slots through an approved table.
	bt, err := m.p.BlockTable(ll.l, from+n)
	if err != nil {
		m.t.Fatalf("BlockTable after Write: %v", err)
	}
	for pos := from; pos < from+n; pos++ {
		pi, slot := bt.Slot(pos)
		if !bt.Writable(pi) {
			m.t.Fatalf("position %d of %s falls in a read-only page", pos, ll.l)
		}
		m.arena[bt.Page(pi)][slot] = writer{ll.l.Tenant, ll.l.Epoch, false}
	}
}

// stage copies a transfer into a lease through a StagingTable, as a
// receiver does before verifying it; the write op later records (commits)
// some of it, or the lease ends with it unrecorded.
func (m *machine) stage() {
	i, ok := m.pickLease()
	if !ok {
		return
	}
	ll := m.leases[i]
	m.p.mu.Lock()
	ls := m.p.leases[ll.l.Epoch]
	prefix, written := ls.readOnly*m.pt, ls.written
	m.p.mu.Unlock()
	tokens := m.draw(ll.slots+1, "stageTokens")
	bt, err := m.p.StagingTable(ll.l, tokens)
	if written != prefix || tokens <= prefix {
		if !errors.Is(err, ErrInvalidArgument) {
			m.t.Fatalf("StagingTable(%d) with %d written, %d cached: got %v, want ErrInvalidArgument", tokens, written, prefix, err)
		}
		return
	}
	if err != nil {
		m.t.Fatalf("StagingTable: %v", err)
	}
	for pos := prefix; pos < tokens; pos++ {
		pi, slot := bt.Slot(pos)
		if !bt.Writable(pi) || !bt.Staged() {
			m.t.Fatalf("staging position %d of %s: writable %v, staged %v", pos, ll.l, bt.Writable(pi), bt.Staged())
		}
		m.arena[bt.Page(pi)][slot] = writer{ll.l.Tenant, ll.l.Epoch, true}
	}
}

func (m *machine) read() {
	i, ok := m.pickLease()
	if !ok {
		return
	}
	ll := m.leases[i]
	written, _ := m.p.Written(ll.l)
	tokens := m.draw(ll.slots+1, "tokens")
	bt, err := m.p.BlockTable(ll.l, tokens)
	if tokens > written {
		var v *ViolationError
		if !errors.As(err, &v) || v.Reason != ReasonUnwritten {
			m.t.Fatalf("read of %d tokens with %d written: got %v, want unwritten-slot violation", tokens, written, err)
		}
		return
	}
	if err != nil {
		m.t.Fatalf("BlockTable(%d of %d written): %v", tokens, written, err)
	}
	for pos := range tokens {
		pi, slot := bt.Slot(pos)
		w := m.arena[bt.Page(pi)][slot]
		switch {
		case !bt.Writable(pi):
			if w.tenant == "" || !m.sameNamespace(w.tenant, ll.l.Tenant) || bt.Tag(pi).Epoch != w.epoch {
				m.t.Fatalf("%s reads prefix slot written by %+v, table expects %+v", ll.l, w, bt.Tag(pi))
			}
		case w != writer{ll.l.Tenant, ll.l.Epoch, false}:
			m.t.Fatalf("%s reads position %d (page %d slot %d) last written by %+v", ll.l, pos, bt.Page(pi), slot, w)
		}
	}
}

func TestPoolProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newMachine(rt, func(n int, label string) int { return rapid.IntRange(0, n-1).Draw(rt, label) })
		m.run(200)
	})
}

// FuzzPool drives the same state machine from bytes.
func FuzzPool(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})
	f.Add([]byte("allocate write read release scrub hold publish extend"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		i := 0
		draw := func(n int, _ string) int {
			if n <= 1 || i >= len(data) {
				return 0
			}
			v := int(data[i])
			i++
			if n > 256 && i < len(data) {
				v = v<<8 | int(data[i])
				i++
			}
			return v % n
		}
		m := newMachine(t, draw)
		for i < len(data) {
			m.step()
			if err := m.p.Check(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
