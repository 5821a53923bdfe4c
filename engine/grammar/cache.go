package grammar

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"unsafe"
)

// maxSharedStates is the size beyond which a cached grammar's automaton is
// not shared any more (each state holds a 1 KiB transition table): the next
// request with that schema compiles a fresh one.
const maxSharedStates = 16384

// DefaultCacheBytes is the byte budget of a Cache built with a budget of 0
// or less.
const DefaultCacheBytes = 512 << 20

// Cache keeps compiled schema grammars by owner (a tenant) and the digest
// of the schema's bytes, so that one owner's requests sending the same
// schema share one automaton and its mask cache (warm after the first
// request). Sharing is safe because both memoize pure functions of the
// grammar. Owners never share an entry: whether a schema is warm says
// nothing about what another owner sent, and an owner's entries count
// against its own share only.
//
// The cache holds at most its byte budget of grammars, as measured by
// Grammar.Bytes when an entry is stored and again at every hit (a
// grammar grows as matchers explore its automaton and fill its mask
// cache). When the total is over the budget, entries are evicted least
// recently used first from the owner furthest over its share (the budget
// divided by the owners holding entries): an owner that fills the cache
// evicts its own entries, never another owner's below that owner's share.
// A grammar larger than its owner's share is returned but not kept. A
// Cache is safe for concurrent use.
type Cache struct {
	budget int64

	mu     sync.Mutex
	byKey  map[cacheEntryKey]*list.Element // guarded by mu
	owners map[string]*cacheOwner          // owners holding entries, guarded by mu
	total  int64                           // bytes of every entry, guarded by mu
	stats  CacheStats                      // guarded by mu
}

type cacheEntryKey struct {
	owner  string
	digest [32]byte
}

type cacheOwner struct {
	lru   *list.List // of *cached; front: most recent
	bytes int64
}

type cached struct {
	key   cacheEntryKey
	g     *Grammar
	bytes int64 // as last measured
}

// CacheStats are a Cache's counters since it was made, and what it holds
// now.
type CacheStats struct {
	Hits      int64 // requests answered from the cache
	Compiles  int64 // schemas compiled (refused ones included)
	Evictions int64 // entries evicted to keep the budget (oversized ones included)
	Entries   int   // entries held now
	Bytes     int64 // their measured bytes now
	Owners    int   // owners holding entries now
	Budget    int64 // the byte budget
}

// NewCache returns a Cache of at most budget bytes of grammars
// (DefaultCacheBytes when budget ≤ 0).
func NewCache(budget int64) *Cache {
	if budget <= 0 {
		budget = DefaultCacheBytes
	}
	return &Cache{budget: budget, byKey: map[cacheEntryKey]*list.Element{}, owners: map[string]*cacheOwner{}}
}

// FromSchema is FromSchema through owner's entries of the cache. Errors:
// as FromSchema (never cached: a refused schema is compiled, and refused,
// each time).
func (c *Cache) FromSchema(owner string, doc []byte) (*Grammar, error) {
	return c.get(owner, sha256.Sum256(doc), func() (*Grammar, error) { return FromSchema(doc) })
}

// get is owner's entry of digest, compiled by compile when absent (never
// cached when compile fails).
func (c *Cache) get(owner string, digest [32]byte, compile func() (*Grammar, error)) (*Grammar, error) {
	key := cacheEntryKey{owner, digest}
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		ent := e.Value.(*cached)
		if ent.g.size() <= maxSharedStates {
			c.stats.Hits++
			c.owners[owner].lru.MoveToFront(e)
			c.resize(ent)
			c.fit(owner)
			c.mu.Unlock()
			return ent.g, nil
		}
		c.remove(e)
		c.stats.Evictions++
	}
	c.stats.Compiles++
	c.mu.Unlock()
	g, err := compile()
	if err != nil {
		return nil, err
	}
	n := g.Bytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok { // compiled meanwhile by another request
		return e.Value.(*cached).g, nil
	}
	o := c.owners[owner]
	if o == nil {
		o = &cacheOwner{lru: list.New()}
		c.owners[owner] = o
	}
	ent := &cached{key: key, g: g, bytes: n}
	c.byKey[key] = o.lru.PushFront(ent)
	o.bytes += n
	c.total += n
	c.fit(owner)
	return g, nil
}

// Stats returns the cache's counters and what it holds.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes, s.Owners, s.Budget = len(c.byKey), c.total, len(c.owners), c.budget
	return s
}

// OwnerBytes returns the measured bytes of owner's entries.
func (c *Cache) OwnerBytes(owner string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.owners[owner]; o != nil {
		return o.bytes
	}
	return 0
}

// OwnersBytes returns the measured bytes of every owner holding entries.
func (c *Cache) OwnersBytes() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.owners))
	for k, o := range c.owners {
		m[k] = o.bytes
	}
	return m
}

// resize measures ent again. c.mu must be held.
func (c *Cache) resize(ent *cached) {
	n := ent.g.Bytes()
	c.owners[ent.key.owner].bytes += n - ent.bytes
	c.total += n - ent.bytes
	ent.bytes = n
}

// fit evicts until the total is within the budget: the least recently used
// entry of owner while owner is over its share, else of the owner furthest
// over its share. Some owner is always over its share while the total is
// over the budget (the shares sum to at most the budget). c.mu must be
// held.
func (c *Cache) fit(owner string) {
	for c.total > c.budget {
		share := c.budget / int64(len(c.owners))
		victim := c.owners[owner]
		if victim == nil || victim.bytes <= share {
			victim = nil
			var most int64
			for _, o := range c.owners {
				if over := o.bytes - share; over > most {
					victim, most = o, over
				}
			}
		}
		c.remove(victim.lru.Back())
		c.stats.Evictions++
	}
}

// remove drops entry e. c.mu must be held.
func (c *Cache) remove(e *list.Element) {
	ent := e.Value.(*cached)
	o := c.owners[ent.key.owner]
	o.lru.Remove(e)
	o.bytes -= ent.bytes
	c.total -= ent.bytes
	delete(c.byKey, ent.key)
	if o.lru.Len() == 0 {
		delete(c.owners, ent.key.owner)
	}
}

// size is the number of parse states built so far.
func (g *Grammar) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.states)
}

// Bytes is an estimate of the memory g holds now: its rules and positions,
// the automaton built so far and its mask cache (a lazy grammar's trigger
// bodies and masks included). It grows as matchers explore g.
func (g *Grammar) Bytes() int64 {
	n := int64(unsafe.Sizeof(*g))
	g.mu.Lock() // rules grow as matchers explore g
	// Slices count their capacity: what append grew them to is held.
	n += int64(cap(g.rules)) * int64(unsafe.Sizeof(rule{}))
	for _, r := range g.rules {
		n += int64(len(r.name)) + 24*int64(cap(r.alts))
		for _, a := range r.alts {
			n += int64(cap(a)) * int64(unsafe.Sizeof(elem{}))
		}
	}
	n += int64(cap(g.pos)) * int64(unsafe.Sizeof(pos{}))
	n += 24 * int64(cap(g.first))
	for _, f := range g.first {
		n += 4 * int64(cap(f))
	}
	// A map entry costs about its key and value twice over (buckets kept
	// half full on average).
	n += int64(len(g.frames)) * (2*int64(unsafe.Sizeof(frameKey(0))+8) + int64(unsafe.Sizeof(frame{})))
	for _, st := range g.states {
		n += 8 + int64(unsafe.Sizeof(*st)) + 8*int64(cap(st.stacks))
	}
	for k := range g.stateIx {
		n += 2*(16+4) + int64(len(k))
	}
	for _, l := range g.cache {
		n += 2*(int64(unsafe.Sizeof(cacheKey{}))+8) + int64(unsafe.Sizeof(*l)) + 8*int64(len(l.bits)) + 4*int64(len(l.exits)+len(l.nz))
	}
	n += 4*int64(cap(g.langIDs)+cap(g.langStamp)+cap(g.langQueue)) + int64(cap(g.langBuf)+cap(g.keyBuf)) + 8*int64(cap(g.outBuf))
	n += int64(len(g.cuts)) * (2*(8+8) + int64(unsafe.Sizeof(stackCut{})))
	for _, k := range g.langs {
		n += 2*(4+16) + int64(len(k))
	}
	g.mu.Unlock()
	if l := g.lazy; l != nil {
		n += 4*int64(len(l.dfa)) + int64(len(l.key))
		for _, t := range l.trig {
			n += int64(unsafe.Sizeof(t)) + int64(len(t.text)) + t.body.Bytes()
		}
		l.mu.Lock()
		for _, m := range l.masks {
			n += 2*(int64(unsafe.Sizeof(maskKey{}))+24) + 8*int64(len(m))
		}
		l.mu.Unlock()
	}
	return n
}
