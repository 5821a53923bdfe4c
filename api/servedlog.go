package api

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// The served log: the ledger's global tree as a C2SP tlog-tiles log under
// /log/, readable without a token, so that any tile client, monitor or
// witness follows it (audit/doc.go, "The served log").
//
//	GET /log/checkpoint                 the latest signed checkpoint (text/plain; not cached)
//	GET /log/tile/<L>/<N>[.p/<W>]       a Merkle tree tile (application/octet-stream; immutable)
//	GET /log/tile/entries/<N>[.p/<W>]   an entry bundle (application/octet-stream; immutable; gzip when accepted)
//
// Who may see what: everyone sees the global tree's size and hashes (so
// how many entries the whole deployment records, never per tenant), and
// the entries audit.ServedPublic admits (deployment facts naming no
// tenant) in full; every other entry is served as its leaf hash, 32
// bytes, which the level-0 tile already holds: no tenant id, request id or
// count per tenant is readable here. A tenant reads its own entries
// through its tenant log (tlog.go). A path that is not a canonical tile
// path (tlog.Tile.Path) is 404, as is a tile the tree has not reached.

// ErrNoLogResource: a /log/ path that names no tile or bundle of this log.
var ErrNoLogResource = cloison.NewError(cloison.CodeNotFound, "no such log resource")

// immutable is the Cache-Control of tiles and bundles: the bytes at a path
// never change (C2SP tlog-tiles: long-lived caching).
const immutable = "public, max-age=31536000, immutable"

// tileCacheBytes bounds the tiles and bundles kept in memory: the bytes at
// a path never change, monitors all read the same recent ones, and the
// routes need no token, so repeated reads cost no database query.
const tileCacheBytes = 16 << 20

func (s *Server) servedLogRoutes(mux *http.ServeMux) {
	cache := newTileCache(tileCacheBytes)
	mux.HandleFunc("GET /log/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		msg, err := s.ops.compliance.Checkpoint(r.Context())
		if err != nil {
			s.logServed("checkpoint", err)
			WriteHTTPError(w, err)
			return
		}
		s.logServed("checkpoint", nil)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(msg)
	})
	mux.HandleFunc("GET /log/tile/{path...}", func(w http.ResponseWriter, r *http.Request) {
		t, entries, ok := parseTilePath(r.PathValue("path"))
		resource := "tile"
		if entries {
			resource = "entries"
		}
		res, hit := cache.get(r.PathValue("path"))
		var err error
		switch {
		case hit:
		case !ok:
			err = ErrNoLogResource
		case entries:
			res.raw, err = s.ops.compliance.EntryBundle(r.Context(), t.N, t.W)
			if err == nil {
				res.gz = gzipped(res.raw)
			}
		default:
			res.raw, err = s.ops.compliance.Tile(r.Context(), t.L, t.N, t.W)
		}
		if err != nil {
			if cloison.ErrorCode(err) == cloison.CodeInvalid {
				err = ErrNoLogResource // an index or width no tile has
			}
			s.logServed(resource, err)
			WriteHTTPError(w, err)
			return
		}
		if !hit {
			cache.put(r.PathValue("path"), res)
		}
		s.logServed(resource, nil)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Cache-Control", immutable)
		body := res.raw
		if entries {
			// Entry bundles SHOULD be compressed (C2SP tlog-tiles).
			w.Header().Set("Vary", "Accept-Encoding")
			if acceptsGzip(r) {
				w.Header().Set("Content-Encoding", "gzip")
				body = res.gz
			}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
}

// gzipped returns b gzip-compressed.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// logServed counts one request of the served log by resource and outcome.
func (s *Server) logServed(resource string, err error) {
	outcome := "served"
	switch {
	case err == nil:
	case cloison.ErrorCode(err) == cloison.CodeNotFound:
		outcome = "not_found"
	default:
		outcome = "error"
	}
	s.metrics.logRequests.WithLabelValues(resource, outcome).Inc()
}

// parseTilePath parses the part of a tile path after "tile/": "<L>/<N>[.p/<W>]"
// or "entries/<N>[.p/<W>]" (N in x-prefixed 3-digit groups, L 0 to 63, W 1 to
// 255; a full tile has W 256). Only the canonical spelling is accepted
// (the one tlog.Tile.Path writes), so each resource has one path.
func parseTilePath(p string) (t tlog.Tile, entries bool, ok bool) {
	level, rest, found := strings.Cut(p, "/")
	if !found {
		return tlog.Tile{}, false, false
	}
	l := 0
	if level == "entries" {
		entries = true
	} else {
		n, err := strconv.Atoi(level)
		if err != nil || n < 0 || n > 63 || strconv.Itoa(n) != level {
			return tlog.Tile{}, false, false
		}
		l = n
	}
	sumdb := "tile/" + strconv.Itoa(audit.TileHeight) + "/" + strconv.Itoa(l) + "/" + rest
	t, err := tlog.ParseTilePath(sumdb)
	if err != nil || t.H != audit.TileHeight || t.L != l || t.W < 1 || t.W > 1<<audit.TileHeight || t.Path() != sumdb {
		return tlog.Tile{}, false, false
	}
	return t, entries, true
}

func acceptsGzip(r *http.Request) bool {
	for _, e := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(e), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// tileCache keeps served tiles and bundles by path, oldest out first,
// within a byte budget.
type tileCache struct {
	mu     sync.Mutex
	budget int
	used   int                     // guarded by mu
	m      map[string]tileResource // guarded by mu
	order  []string                // insertion order; guarded by mu
}

// tileResource is a tile or bundle as served: raw, and for a bundle gzip.
type tileResource struct{ raw, gz []byte }

func (r tileResource) size() int { return len(r.raw) + len(r.gz) }

func newTileCache(budget int) *tileCache {
	return &tileCache{budget: budget, m: map[string]tileResource{}}
}

func (c *tileCache) get(path string) (tileResource, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[path]
	return r, ok
}

func (c *tileCache) put(path string, r tileResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[path]; ok || r.size() > c.budget {
		return
	}
	for c.used+r.size() > c.budget && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.used -= c.m[old].size()
		delete(c.m, old)
	}
	c.m[path] = r
	c.order = append(c.order, path)
	c.used += r.size()
}
