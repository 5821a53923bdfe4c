package grammar

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// maxSharedStates is the size beyond which a cached grammar's automaton is
// not shared any more (each state holds a 1 KiB transition table): the next
// request with that schema compiles a fresh one.
const maxSharedStates = 16384

// Cache keeps compiled schema grammars by the digest of the schema's bytes,
// least recently used first out, so that requests sending the same schema
// share one automaton and its mask cache (warm after the first request).
// Sharing is safe because both memoize pure functions of the grammar. A
// Cache is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int
	byKey map[[32]byte]*list.Element // guarded by mu
	order *list.List                 // guarded by mu; front: most recent
}

type cached struct {
	key [32]byte
	g   *Grammar
}

// NewCache returns a Cache of at most n grammars.
func NewCache(n int) *Cache {
	return &Cache{max: max(n, 1), byKey: map[[32]byte]*list.Element{}, order: list.New()}
}

// FromSchema is FromSchema through the cache. Errors: as FromSchema (never
// cached: a refused schema is compiled, and refused, each time).
func (c *Cache) FromSchema(doc []byte) (*Grammar, error) {
	key := sha256.Sum256(doc)
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		g := e.Value.(*cached).g
		if g.size() <= maxSharedStates {
			c.order.MoveToFront(e)
			c.mu.Unlock()
			return g, nil
		}
		c.order.Remove(e)
		delete(c.byKey, key)
	}
	c.mu.Unlock()
	g, err := FromSchema(doc)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok { // compiled meanwhile by another request
		return e.Value.(*cached).g, nil
	}
	c.byKey[key] = c.order.PushFront(&cached{key, g})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cached).key)
	}
	return g, nil
}

// size is the number of parse states built so far.
func (g *Grammar) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.states)
}
