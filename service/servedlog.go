package service

import (
	"context"
)

// The served log (C2SP tlog-tiles; audit/doc.go, "The served log"): the
// global checkpoint, the tree's tiles and its entry bundles, readable by
// anyone. What they show: the global tree's size and hashes, and in full
// only the entries audit.ServedPublic admits (deployment facts that name
// no tenant); every other entry is its leaf hash, already in the level-0
// tile. The transport serves them without a token.

// Tile returns the tree's tile at level, index n, width hashes (256: the
// full tile). Errors: the log's (audit.ErrOutOfRange, audit.ErrNotFound).
func (c *Compliance) Tile(ctx context.Context, level int, n int64, width int) ([]byte, error) {
	return c.d.Log.Tile(ctx, level, n, width)
}

// EntryBundle returns entry bundle n of width entries. Errors: the log's
// (audit.ErrOutOfRange, audit.ErrNotFound, a break).
func (c *Compliance) EntryBundle(ctx context.Context, n int64, width int) ([]byte, error) {
	return c.d.Log.EntryBundle(ctx, n, width)
}
