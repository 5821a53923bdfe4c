package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

// tileHeight is audit.TileHeight (migration 00024's tiles).
const tileHeight = audit.TileHeight

// treeReader is a tlog.HashReader over tlog_tiles (through q: a
// transaction or a pool), answering first from overlay: each stored hash
// is computed from the widest stored row of the tile that holds it
// (tlog.TileForIndex, tlog.HashFromTile). Tiles never change once
// committed (a wider row keeps the narrower rows' hashes), so reading them
// outside the writer's transaction is safe; a hash whose tile is absent or
// too narrow is a schema error (the tree lags the events), never a zero
// hash.
type treeReader struct {
	ctx     context.Context
	q       querier
	overlay map[int64]tlog.Hash
}

// readTilesSQL reads the widest row of each (level, n) asked for.
const readTilesSQL = `SELECT DISTINCT ON (t.level, t.n) t.level, t.n, t.width, t.hashes FROM tlog_tiles t
  JOIN unnest($1::int[], $2::bigint[]) AS u(l, n) ON t.level = u.l AND t.n = u.n
  ORDER BY t.level, t.n, t.width DESC`

type tileKey struct {
	level int
	n     int64
}

func (r *treeReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var missing []int
	want := map[tileKey]bool{}
	var levels []int32
	var ns []int64
	for i, x := range indexes {
		if h, ok := r.overlay[x]; ok {
			out[i] = h
			continue
		}
		missing = append(missing, i)
		t := tlog.TileForIndex(tileHeight, x)
		if k := (tileKey{t.L, t.N}); !want[k] {
			want[k] = true
			levels, ns = append(levels, int32(t.L)), append(ns, t.N)
		}
	}
	if len(missing) > 0 {
		got := make(map[tileKey][]byte, len(levels))
		rows, err := r.q.Query(r.ctx, readTilesSQL, levels, ns)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var l, w int32
			var n int64
			var data []byte
			if err := rows.Scan(&l, &n, &w, &data); err != nil {
				rows.Close()
				return nil, err
			}
			got[tileKey{int(l), n}] = data
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for _, i := range missing {
			x := indexes[i]
			t := tlog.TileForIndex(tileHeight, x)
			data := got[tileKey{t.L, t.N}]
			if len(data) < t.W*tlog.HashSize {
				return nil, fmt.Errorf("%w: tree hash %d is missing (tile %d/%d has %d of %d hashes)", ErrSchema, x, t.L, t.N, len(data)/tlog.HashSize, t.W)
			}
			h, err := tlog.HashFromTile(t, data, x)
			if err != nil {
				return nil, fmt.Errorf("%w: tree hash %d: %v", ErrSchema, x, err)
			}
			out[i] = h
		}
	}
	return out, nil
}

// tileRowSet is audit.TilesOfGrowth's tiles as the columns one INSERT
// takes (unnest).
type tileRowSet struct {
	levels []int32
	ns     []int64
	widths []int32
	data   [][]byte
}

// tileRows returns the tile rows that growing the tree from size old to
// size n writes (audit.TilesOfGrowth), their hashes read from r.
func tileRows(old, n int64, r tlog.HashReader) (tileRowSet, error) {
	tiles, err := audit.TilesOfGrowth(old, n, r)
	if err != nil {
		return tileRowSet{}, err
	}
	var out tileRowSet
	for _, t := range tiles {
		out.levels = append(out.levels, int32(t.Level))
		out.ns = append(out.ns, t.N)
		out.widths = append(out.widths, int32(t.Width))
		out.data = append(out.data, t.Data)
	}
	return out, nil
}

const tileInsertSQL = "INSERT INTO tlog_tiles (level, n, width, hashes) SELECT * FROM unnest($1::int[], $2::bigint[], $3::int[], $4::bytea[])"

// backfillSQL is how the runtime role writes the tiles of a ledger that
// has no tree yet (tlog_backfill, migration 00025: it has no INSERT on
// tlog_tiles; the function refuses once a tree note is signed, tiles past
// the ledger and level-0 hashes that are not the events' leaf hashes).
const backfillSQL = "SELECT tlog_backfill($1::int[], $2::bigint[], $3::int[], $4::bytea[])"

// insertTiles writes the tile rows of growing the tree from old to n with
// tileInsertSQL (a role holding INSERT on tlog_tiles: the tests' owner).
func insertTiles(ctx context.Context, q execer, old, n int64, r tlog.HashReader) error {
	return writeTiles(ctx, q, tileInsertSQL, old, n, r)
}

type execer interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

// writeTiles runs stmt (tileInsertSQL or backfillSQL) over the tile rows
// of growing the tree from old to n.
func writeTiles(ctx context.Context, q execer, stmt string, old, n int64, r tlog.HashReader) error {
	rs, err := tileRows(old, n, r)
	if err != nil || len(rs.levels) == 0 {
		return err
	}
	_, err = q.Exec(ctx, stmt, rs.levels, rs.ns, rs.widths, rs.data)
	return err
}

// extendTree computes the tree step of appending recs, already placed
// (recs[0].Seq is the committed size + 1), reading earlier hashes from
// frontier first and q second (audit.ExtendTree).
func extendTree(ctx context.Context, q querier, frontier map[int64]tlog.Hash, recs []audit.Record) (audit.TreeStep, error) {
	return audit.ExtendTree(&treeReader{ctx: ctx, q: q}, frontier, recs)
}

// treeSizeOn returns the number of leaves the committed tree has: where
// its widest last level-0 tile ends.
func treeSizeOn(ctx context.Context, q querier) (int64, error) {
	var n int64
	var w int32
	err := q.QueryRow(ctx, "SELECT n, width FROM tlog_tiles WHERE level = 0 ORDER BY n DESC, width DESC LIMIT 1").Scan(&n, &w)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return n<<tileHeight + int64(w), nil
}

// ensureTree checks that the tree covers the committed head and, once,
// under the ledger lock, gives a ledger written before the tree existed
// (migration 00005: no stored hash, no signed note) its stored hashes,
// computed from its events a page at a time. A tree larger or smaller than
// the ledger otherwise is refused (ErrSchema): rows were removed behind the
// triggers.
//
// It first looks without the lock (one snapshot): a tree that covers the
// ledger, the usual case, needs no lock and no write, so read-only tools
// can open a Store.
func (s *Store) ensureTree(ctx context.Context) error {
	var covered bool
	if err := s.readOnly(ctx, func(tx pgx.Tx) error {
		head, err := headOn(ctx, tx)
		if err != nil {
			return err
		}
		n, err := treeSizeOn(ctx, tx)
		covered = err == nil && uint64(n) == head.Seq
		return err
	}); err != nil {
		return err
	}
	if covered {
		return nil
	}
	return s.readWrite(ctx, func(tx pgx.Tx) error {
		var seq int64
		var hash []byte
		if err := tx.QueryRow(ctx, "SELECT seq, hash FROM audit_head()").Scan(&seq, &hash); err != nil {
			return err
		}
		n, err := treeSizeOn(ctx, tx)
		if err != nil {
			return err
		}
		if n > seq {
			return fmt.Errorf("%w: the Merkle tree has %d leaves, the ledger %d events", ErrSchema, n, seq)
		}
		// Only a ledger that never had a tree (no hash, no signed note) is
		// given one: a tree that lags the ledger behind the trigger means
		// rows were removed, and is refused rather than repaired.
		var signed bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tlog_checkpoints)").Scan(&signed); err != nil {
			return err
		}
		if n > 0 || signed {
			return fmt.Errorf("%w: the Merkle tree has %d leaves, the ledger %d events", ErrSchema, n, seq)
		}
		var frontier audit.HashMap
		for n < seq {
			var page []audit.Record
			if err := scanRows(ctx, tx, uint64(n)+1, uint64(seq), 4096, func(r audit.Record) error {
				page = append(page, r)
				return nil
			}); err != nil {
				return err
			}
			if len(page) == 0 || page[0].Seq != uint64(n)+1 {
				return fmt.Errorf("%w: ledger gap after seq %d", ErrSchema, n)
			}
			st, err := extendTree(ctx, tx, frontier, page)
			if err != nil {
				return err
			}
			next := int64(page[len(page)-1].Seq)
			if err := writeTiles(ctx, tx, backfillSQL, n, next, &treeReader{ctx: ctx, q: tx, overlay: st.All(frontier)}); err != nil {
				return err
			}
			frontier, n = st.Frontier, next
		}
		return nil
	})
}

// committedTreeHead reads the committed tree head (size and root) in one
// snapshot.
func (s *Store) committedTreeHead(ctx context.Context) (audit.TreeHead, error) {
	h := audit.TreeHead{Origin: s.cfg.Origin}
	err := translate(pgx.BeginTxFunc(ctx, s.scan, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		n, err := treeSizeOn(ctx, tx)
		if err != nil || n == 0 {
			return err
		}
		h.Size = uint64(n)
		h.Root, err = tlog.TreeHash(n, &treeReader{ctx: ctx, q: tx})
		return err
	}))
	if err == nil && h.Size == 0 {
		return h, audit.ErrEmptyLedger
	}
	return h, err
}

// SignTree signs the committed tree head now, stores the note in
// tlog_checkpoints and returns it. The writer calls it at most every
// TreeCheckpointInterval; callers that need a checkpoint covering what
// they just wrote (a register write, a test) call it directly.
//
// Errors: ErrNoSigningKey; *SignRefusedError (ErrSigningRefused, with
// audit.ErrFork or audit.ErrSmallerTree) when the tree does not extend a
// tree known outside the database (sign.go); audit.ErrEmptyLedger; the
// translated database errors.
func (s *Store) SignTree(ctx context.Context) ([]byte, error) {
	if s.signer == nil {
		return nil, ErrNoSigningKey
	}
	if err := s.Sync(ctx); err != nil { // the note covers every event staged before
		return nil, err
	}
	h, err := s.committedTreeHead(ctx)
	if err != nil {
		return nil, err
	}
	return s.storeTreeNote(ctx, h)
}

// storeTreeNote proves that h extends every tree the store knows outside
// the database (sign.go), signs it, writes the note to CheckpointDir and
// only then stores it.
func (s *Store) storeTreeNote(ctx context.Context, h audit.TreeHead) ([]byte, error) {
	if err := s.proveTree(ctx, h); err != nil {
		return nil, err
	}
	msg, err := audit.SignTreeHead(s.signer, h)
	if err != nil {
		return nil, err
	}
	if s.cfg.CheckpointDir != "" {
		if err := s.writeTreeNote(h, msg); err != nil {
			return nil, err
		}
	}
	s.signedTree(h)
	if _, err := s.pool.Exec(ctx, `INSERT INTO tlog_checkpoints (size, root, signed_at, note) VALUES ($1, $2, $3, $4)
		ON CONFLICT (size) DO NOTHING`, int64(h.Size), h.Root[:], time.Now(), string(msg)); err != nil {
		return nil, translate(err)
	}
	s.noteMu.Lock()
	if h.Size > s.noteSize {
		s.noteSize = h.Size
	}
	s.noteAt = time.Now()
	s.noteMu.Unlock()
	return msg, nil
}

// maybeSignTree signs the tree when it grew since this store's last note
// and the interval has passed. head/root, when given (size > 0), are the
// writer's own commit; otherwise the committed head is read. A failure is
// logged and kept for Close; it never fails an append.
func (s *Store) maybeSignTree(h audit.TreeHead, force bool) {
	if s.signer == nil {
		return
	}
	s.noteMu.Lock()
	due := force || time.Since(s.noteAt) >= s.cfg.TreeCheckpointInterval
	grown := h.Size == 0 || h.Size > s.noteSize
	s.noteMu.Unlock()
	if !due || !grown {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if h.Size == 0 {
		var cur audit.TreeHead
		cur, err = s.committedTreeHead(ctx)
		s.noteMu.Lock()
		stale := err == nil && cur.Size <= s.noteSize
		s.noteMu.Unlock()
		if errors.Is(err, audit.ErrEmptyLedger) || stale {
			return
		}
		if err == nil {
			_, err = s.storeTreeNote(ctx, cur)
		}
	} else {
		_, err = s.storeTreeNote(ctx, h)
	}
	s.noteMu.Lock()
	s.noteErr = err
	s.noteMu.Unlock()
	if err != nil {
		s.cfg.Logger.Error("audit tree checkpoint failed", "size", h.Size, "err", err)
	}
}

// TreeCheckpoint returns the latest signed tree checkpoint (a C2SP
// tlog-checkpoint note), as stored.
//
// Errors: *SignRefusedError (ErrSigningRefused) once the store refused to
// sign (fail closed: the stored notes vouch for a ledger it no longer
// trusts); audit.ErrNoCheckpoint when none is stored; the translated
// database errors.
func (s *Store) TreeCheckpoint(ctx context.Context) ([]byte, error) {
	if err := s.SigningRefused(); err != nil {
		return nil, err
	}
	var msg string
	err := s.scan.QueryRow(ctx, "SELECT note FROM tlog_checkpoints ORDER BY size DESC LIMIT 1").Scan(&msg)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, audit.ErrNoCheckpoint
	}
	if err != nil {
		return nil, translate(err)
	}
	return []byte(msg), nil
}

// TreeVerifierKey returns the note verifier key that checks this store's
// tree checkpoints (what a verifier is given out of band).
//
// Errors: ErrNoSigningKey.
func (s *Store) TreeVerifierKey() (string, error) {
	if s.signer == nil {
		return "", ErrNoSigningKey
	}
	return s.verifierKey, nil
}

// InclusionProof returns the proof that entry seq (1-based) is leaf seq-1
// of the tree of size treeSize (a size a checkpoint the verifier holds
// names), for tlog.CheckRecord or audit.VerifyInclusion.
//
// Errors: audit.ErrEmptyLedger when the tree is empty; audit.ErrOutOfRange when
// seq is 0 or beyond treeSize, or treeSize beyond the committed tree; the
// translated database errors.
func (s *Store) InclusionProof(ctx context.Context, seq, treeSize uint64) (tlog.RecordProof, error) {
	n, err := s.proofSize(ctx, treeSize)
	if err != nil {
		return nil, err
	}
	if seq == 0 || seq > uint64(n) {
		return nil, fmt.Errorf("%w: entry %d in a tree of size %d", audit.ErrOutOfRange, seq, n)
	}
	p, err := tlog.ProveRecord(n, int64(seq)-1, &treeReader{ctx: ctx, q: s.scan})
	return p, translate(err)
}

// ConsistencyProof returns the proof that the tree of size newSize extends
// the tree of size oldSize, for tlog.CheckTree or audit.VerifyConsistency.
//
// Errors: audit.ErrEmptyLedger when the tree is empty; audit.ErrOutOfRange when
// oldSize is 0 or above newSize, or newSize beyond the committed tree; the
// translated database errors.
func (s *Store) ConsistencyProof(ctx context.Context, oldSize, newSize uint64) (tlog.TreeProof, error) {
	n, err := s.proofSize(ctx, newSize)
	if err != nil {
		return nil, err
	}
	if oldSize == 0 || oldSize > uint64(n) {
		return nil, fmt.Errorf("%w: size %d to size %d", audit.ErrOutOfRange, oldSize, n)
	}
	p, err := tlog.ProveTree(n, int64(oldSize), &treeReader{ctx: ctx, q: s.scan})
	return p, translate(err)
}

// proofSize checks that size is a tree size the committed tree has.
func (s *Store) proofSize(ctx context.Context, size uint64) (int64, error) {
	committed, err := treeSizeOn(ctx, s.scan)
	if err != nil {
		return 0, translate(err)
	}
	if committed == 0 {
		return 0, audit.ErrEmptyLedger
	}
	if size == 0 || size > uint64(committed) {
		return 0, fmt.Errorf("%w: tree size %d, committed %d", audit.ErrOutOfRange, size, committed)
	}
	return int64(size), nil
}

// noQuerier refuses every query: VerifyTree computes from the entries
// alone and must never fall back to a stored hash.
type noQuerier struct{}

func (noQuerier) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, fmt.Errorf("%w: tree verification read a stored hash", ErrSchema)
}

func (noQuerier) QueryRow(context.Context, string, ...any) pgx.Row { return nil }

// VerifyTree recomputes the whole Merkle tree from the entries (on the scan
// pool, a page at a time, in constant memory) and compares every stored
// tile row with it (each hash of each row, the partial rows of earlier
// sizes included). It returns the recomputed tree head. It is the
// operator's and the auditor's check that the stored tree is the tree of
// the stored entries; a verifier outside uses checkpoints and proofs
// instead.
//
// Errors: *audit.BreakError with audit.ReasonTree at the first entry whose
// stored tree hashes differ or are missing, or at the head when the tree
// is larger or smaller than the ledger; audit.ErrEmptyLedger; the
// translated database errors.
func (s *Store) VerifyTree(ctx context.Context) (audit.TreeHead, error) {
	head, err := headOn(ctx, s.scan)
	if err != nil {
		return audit.TreeHead{}, err
	}
	if head.Seq == 0 {
		return audit.TreeHead{}, audit.ErrEmptyLedger
	}
	var frontier audit.HashMap
	var root tlog.Hash
	var size int64 // leaves verified so far
	page := make([]audit.Record, 0, s.cfg.ScanPage)
	flush := func() error {
		st, err := extendTree(ctx, noQuerier{}, frontier, page)
		if err != nil {
			return err
		}
		hashes := st.All(nil)
		next := int64(page[len(page)-1].Seq)
		for l := 0; next>>(tileHeight*l) > 0; l++ {
			c0, c1 := size>>(tileHeight*l), next>>(tileHeight*l)
			if c1 == c0 {
				continue
			}
			if err := s.verifyTiles(ctx, l, c0, c1, hashes); err != nil {
				return err
			}
		}
		frontier, root, size = st.Frontier, st.Root, next
		page = page[:0]
		return nil
	}
	err = s.scanPages(ctx, 1, head.Seq, func(r audit.Record) error {
		page = append(page, r)
		if len(page) == cap(page) {
			return flush()
		}
		return nil
	})
	if err == nil && len(page) > 0 {
		err = flush()
	}
	if err != nil {
		return audit.TreeHead{}, err
	}
	var bl, bw int32
	var bn int64
	err = s.scan.QueryRow(ctx, "SELECT level, n, width FROM tlog_tiles WHERE n * 256 + width > ($1::bigint >> (8 * level)) ORDER BY level, n, width LIMIT 1",
		int64(head.Seq)).Scan(&bl, &bn, &bw)
	if err == nil {
		return audit.TreeHead{}, &audit.BreakError{Seq: head.Seq, Reason: audit.ReasonTree,
			Detail: fmt.Sprintf("tile %d/%d.w%d holds hashes beyond the ledger's %d entries", bl, bn, bw, head.Seq)}
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return audit.TreeHead{}, translate(err)
	}
	n, err := treeSizeOn(ctx, s.scan)
	if err != nil {
		return audit.TreeHead{}, translate(err)
	}
	if uint64(n) != head.Seq {
		return audit.TreeHead{}, &audit.BreakError{Seq: head.Seq, Reason: audit.ReasonTree,
			Detail: fmt.Sprintf("the tree has %d leaves, the ledger %d entries", n, head.Seq)}
	}
	return audit.TreeHead{Origin: s.cfg.Origin, Size: head.Seq, Root: root}, nil
}

// verifyTiles compares the stored tile rows of tile level l holding
// positions c0 .. c1-1 (hashes of tree level 8l) with the recomputed
// hashes (by stored index), and requires every position to be stored.
func (s *Store) verifyTiles(ctx context.Context, l int, c0, c1 int64, hashes map[int64]tlog.Hash) error {
	rows, err := s.scan.Query(ctx, "SELECT n, width, hashes FROM tlog_tiles WHERE level = $1 AND n BETWEEN $2 AND $3",
		int32(l), c0>>tileHeight, (c1-1)>>tileHeight)
	if err != nil {
		return translate(err)
	}
	type row struct {
		n    int64
		w    int32
		data []byte
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.n, &x.w, &x.data)
		return x, err
	})
	if err != nil {
		return translate(err)
	}
	broken := func(p int64, detail string) error {
		last := uint64(p+1) << uint(tileHeight*l) // last leaf the hash covers, 1-based
		return &audit.BreakError{Seq: last, Reason: audit.ReasonTree, Detail: detail}
	}
	covered := map[int64]int64{} // tile n -> positions stored
	for _, r := range got {
		lo, hi := max(c0, r.n<<tileHeight), min(c1, r.n<<tileHeight+int64(r.w))
		for p := lo; p < hi; p++ {
			want := hashes[tlog.StoredHashIndex(tileHeight*l, p)]
			off := (p - r.n<<tileHeight) * tlog.HashSize
			if string(r.data[off:off+tlog.HashSize]) != string(want[:]) {
				return broken(p, fmt.Sprintf("tile %d/%d.w%d: hash %d (tree level %d) is not the entries' hash", l, r.n, r.w, p, tileHeight*l))
			}
		}
		covered[r.n] = max(covered[r.n], hi-r.n<<tileHeight)
	}
	for tn := c0 >> tileHeight; tn <= (c1-1)>>tileHeight; tn++ {
		if need := min(1<<tileHeight, c1-tn<<tileHeight); covered[tn] < need {
			return broken(tn<<tileHeight+covered[tn], fmt.Sprintf("tile %d/%d: hashes %d.. of tree level %d are not stored", l, tn, covered[tn], tileHeight*l))
		}
	}
	return nil
}
