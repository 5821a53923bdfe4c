package tenancy

import (
	"sync"
	"time"
)

// ClientCacheTTL is how long a Store trusts what it last read of an API
// client or of a token's revocation: a revocation made by another process
// takes effect here within it (in the revoking process, at once). Verify
// reads both on every request; the cache keeps that off the database.
const ClientCacheTTL = 2 * time.Second

// maxCached bounds each cache map; past it the map is emptied (entries are
// cheap to reread, and an attacker sending many subjects gains nothing).
const maxCached = 1 << 16

type cachedClient struct {
	c   Client
	err error // ErrNotFound is cached too; other errors never are
	at  time.Time
}

type cachedRevocation struct {
	revoked bool
	at      time.Time
}

// lookupCache is shared by a Store and its WithLedger copies.
type lookupCache struct {
	mu      sync.Mutex
	clients map[string]cachedClient     // guarded by mu
	tokens  map[string]cachedRevocation // guarded by mu: issuer + "\x00" + jti
}

func newLookupCache() *lookupCache {
	return &lookupCache{clients: map[string]cachedClient{}, tokens: map[string]cachedRevocation{}}
}

func (c *lookupCache) client(id string, now time.Time) (cachedClient, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.clients[id]
	if !ok || now.Sub(e.at) >= ClientCacheTTL || now.Before(e.at) {
		return cachedClient{}, false
	}
	return e, true
}

func (c *lookupCache) putClient(id string, e cachedClient) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.clients) >= maxCached {
		clear(c.clients)
	}
	c.clients[id] = e
}

func (c *lookupCache) forgetClient(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.clients, id)
}

func (c *lookupCache) token(key string, now time.Time) (bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.tokens[key]
	if !ok || now.Sub(e.at) >= ClientCacheTTL || now.Before(e.at) {
		return false, false
	}
	return e.revoked, true
}

func (c *lookupCache) putToken(key string, revoked bool, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tokens) >= maxCached {
		clear(c.tokens)
	}
	c.tokens[key] = cachedRevocation{revoked: revoked, at: at}
}
