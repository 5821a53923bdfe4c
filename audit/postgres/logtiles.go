package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

// The served log (audit/doc.go, "The served log"): the global tree's C2SP
// tiles as tlog_tiles stores them, and entry bundles built from the
// entries (audit.ServedEntry: a tenant's entry as its leaf hash). Both
// read the scan pool and only what is committed; a tile or bundle is
// immutable once it exists (a narrower width is a prefix of a wider row).

// Tile returns the C2SP tile at level, index n, of width hashes (1 to
// 256; 256: the full tile), cut from the widest stored row of (level, n).
//
// Errors: audit.ErrOutOfRange for a level, index or width that is not a
// tile's; audit.ErrNotFound when the tree has no such tile yet; the
// translated database errors.
func (s *Store) Tile(ctx context.Context, level int, n int64, width int) ([]byte, error) {
	if level < 0 || level > 63 || n < 0 || width < 1 || width > 1<<tileHeight {
		return nil, fmt.Errorf("%w: tile %d/%d width %d", audit.ErrOutOfRange, level, n, width)
	}
	var data []byte
	err := s.scan.QueryRow(ctx, `SELECT hashes FROM tlog_tiles WHERE level = $1 AND n = $2 ORDER BY width DESC LIMIT 1`,
		int32(level), n).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, audit.ErrNotFound
	}
	if err != nil {
		return nil, translate(err)
	}
	if len(data) < width*tlog.HashSize {
		return nil, audit.ErrNotFound
	}
	return data[:width*tlog.HashSize], nil
}

// EntryBundle returns the C2SP entry bundle n of width entries (1 to 256):
// entries n·256+1 … n·256+width, each audit.ServedEntry, each checked
// against the stored level-0 tile (a served bundle always hashes to the
// tree the checkpoints sign).
//
// Errors: audit.ErrOutOfRange for an index or width that is not a
// bundle's; audit.ErrNotFound when the tree does not reach its last entry
// yet; *audit.BreakError (audit.ReasonTree) when an entry is not its
// stored leaf; the translated database errors.
func (s *Store) EntryBundle(ctx context.Context, n int64, width int) ([]byte, error) {
	tile, err := s.Tile(ctx, 0, n, width)
	if err != nil {
		return nil, err
	}
	first := uint64(n)<<tileHeight + 1
	last := first + uint64(width) - 1
	var out []byte
	next := first
	err = scanRows(ctx, s.scan, first, last, width, func(r audit.Record) error {
		if r.Seq != next {
			return &audit.BreakError{Seq: next, Reason: audit.ReasonTree, Detail: "an entry of a served bundle is missing"}
		}
		i := r.Seq - first
		var leaf tlog.Hash
		copy(leaf[:], tile[i*tlog.HashSize:])
		if audit.LeafHash(r) != leaf {
			return &audit.BreakError{Seq: r.Seq, Reason: audit.ReasonTree, Detail: "the entry is not its stored leaf"}
		}
		var err error
		if out, err = audit.AppendBundleEntry(out, audit.ServedEntry(r)); err != nil {
			return err
		}
		next++
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	if next != last+1 {
		return nil, &audit.BreakError{Seq: next, Reason: audit.ReasonTree, Detail: "an entry of a served bundle is missing"}
	}
	return out, nil
}
