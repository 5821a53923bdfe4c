package isolation

import (
	"fmt"

	"github.com/cloison/cloison"
)

// Lease names one allocation of KV pages: (tenant, request, epoch). Epochs are
// unique per pool and never reused, so a Lease value from a released (or
// preempted and re-admitted) allocation is always detected as stale.
type Lease struct {
	Tenant  cloison.TenantID
	Request cloison.RequestID
	Epoch   uint64
}

func (l Lease) String() string {
	return fmt.Sprintf("%s/%s@%d", l.Tenant, l.Request, l.Epoch)
}

// Tag is the ownership tag of a page's KV contents as a kernel sees it: the
// pool-local tenant number and the epoch of the lease that wrote the page.
// The zero Tag means "no owner": a scrubbed or never-written page. Backends
// keep a Tag per page in their arena, set it when they write KV through a
// BlockTable and compare it with the BlockTable's expected Tag before every
// read, so that even a bookkeeping bug above them cannot make attention read a
// page another lease wrote.
type Tag struct {
	Tenant uint32
	// Gen is the page's generation when the lease wrote it. A page's
	// generation grows every time it leaves an owner, so a backend can
	// refuse a write whose table is of an older generation than the page's
	// current contents: a stale table never overwrites a later owner's KV.
	Gen   uint32
	Epoch uint64
}

// IsZero reports whether t is the no-owner tag.
func (t Tag) IsZero() bool { return t == Tag{} }

// BlockTable is the list of pages that attention may read for one lease,
// approved by Pool.BlockTable: every page belongs to the lease (or is a
// read-only prefix page of the lease's namespace that the lease holds) and
// every slot below Tokens() was written in the page's current epoch.
//
// Only the pool constructs a non-empty BlockTable; its fields are unexported so
// that a kernel cannot be handed a page list the pool did not check. The zero
// BlockTable is valid and covers nothing. A BlockTable is a snapshot: build a
// fresh one for every step, after the step's Pool.Write and before the kernel
// reads.
type BlockTable struct {
	lease      Lease
	tokens     int
	pageTokens int
	readOnly   int // leading pages that are shared prefix pages: never written through this table
	own        Tag // Tenant and Epoch of every page at index >= readOnly
	pages      []int32
	gens       []uint32 // generation of each page when the lease took it
	tags       []Tag    // tags of the readOnly prefix pages (their writers')
	staged     bool     // from StagingTable: for CopyIn only, never for reads
}

// Lease returns the lease the table was approved for.
func (b BlockTable) Lease() Lease { return b.lease }

// Tokens returns how many leading token positions the table covers; every one
// of them was written in the current epoch.
func (b BlockTable) Tokens() int { return b.tokens }

// PageTokens returns the number of token slots per page.
func (b BlockTable) PageTokens() int { return b.pageTokens }

// Len returns the number of pages in the table.
func (b BlockTable) Len() int { return len(b.pages) }

// Page returns the pool index of the i-th page.
func (b BlockTable) Page(i int) int32 { return b.pages[i] }

// Tag returns the expected ownership tag of the i-th page's contents.
func (b BlockTable) Tag(i int) Tag {
	if i < b.readOnly {
		return b.tags[i]
	}
	t := b.own
	t.Gen = b.gens[i]
	return t
}

// Staged reports whether the table came from Pool.StagingTable: its positions
// may hold transferred KV that is not verified yet. A kernel may copy into its
// Writable pages (Arena.CopyIn) but must refuse to read through it (Attention,
// CopyOut, WriteKV): the pool has not recorded its slots as written.
func (b BlockTable) Staged() bool { return b.staged }

// Writable reports whether the lease may write KV into the i-th page. Shared
// prefix pages are read-only.
func (b BlockTable) Writable(i int) bool { return i >= b.readOnly }

// Slot maps a token position to its page index in the table and its slot in
// that page. It panics if pos is outside [0, Tokens()): callers check bounds,
// as with a slice.
func (b BlockTable) Slot(pos int) (i int, slot int) {
	if pos < 0 || pos >= b.tokens {
		panic(fmt.Sprintf("isolation: position %d outside block table of %d tokens", pos, b.tokens))
	}
	return pos / b.pageTokens, pos % b.pageTokens
}
