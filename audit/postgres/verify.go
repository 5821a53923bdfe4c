package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

// Verify reads the whole ledger, recomputes every hash, checks every
// stored and external checkpoint (signature, and head at its size),
// recomputes the Merkle tree and checks the latest stored tree note signed
// by one of opts.Keys (notes of other keys are passed over) and
// opts.Trusted against it, recomputes the stored tenant logs
// (VerifyTenantLogs), and returns every break it finds (*audit.Breaks:
// a broken entry never hides a later one, nor a tree or tenant log
// break). It fails, never warns: an empty ledger, or a ledger that no
// signed checkpoint or tree note vouches for (every checkpoint deleted,
// the chain rewritten), is refused with a named error unless
// opts.ChainOnly.
//
// It runs on the scan pool and holds no long transaction: the stored
// checkpoints are read first, then the chain is read in keyset pages (Scan)
// up to the head read after them. The ledger is append-only and committed
// in seq order, and a checkpoint is written only after its events commit,
// so every checkpoint read is within the rows verified, and a live writer
// causes no false truncation report. The external directory is read first
// of all, for the same reason.
//
// Errors: *audit.Breaks (errors.As finds the first *audit.BreakError) for
// a broken chain, checkpoint or tree
// (audit.ReasonCheckpointSig, ReasonCheckpoint, ReasonTruncated,
// ReasonTree for tree notes too, ReasonTenantLog, ReasonStaged for an
// event staged beyond the bound, ReasonSignature for a signed kind
// unsigned after signing began or a bad event signature, ReasonBackdated,
// ReasonRowState for a tenant, client or key row that is not what its
// last event states);
// audit.ErrEmptyLedger; ErrPending; audit.ErrNoCheckpoint
// when no checkpoint or tree note matched; audit.ErrSmallerTree and
// audit.ErrFork against opts.Trusted, which must be signed by one of
// opts.Keys (audit.ErrBadSignature otherwise); the database errors of Scan.
func (s *Store) Verify(ctx context.Context, opts audit.VerifyOptions) (audit.Result, error) {
	var external []SourcedCheckpoint
	if opts.ExternalDir != "" {
		var err error
		if external, err = LoadCheckpointFiles(opts.ExternalDir); err != nil {
			return audit.Result{}, err
		}
	}
	// A row staged beyond the bound is under no hash: a failure, found
	// before anything is integrated (Sync would hide it).
	var staleErr error
	if !opts.ChainOnly {
		head, err := headOn(ctx, s.scan)
		if err != nil {
			return audit.Result{}, err
		}
		bound := opts.StagedBound
		if bound <= 0 {
			bound = s.cfg.IntegrationBound
		}
		if err := staleStaged(ctx, s.scan, head.Seq, bound); err != nil {
			var be *audit.BreakError
			if !errors.As(err, &be) {
				return audit.Result{}, err
			}
			staleErr = err
		}
	}
	if err := s.Sync(ctx); err != nil {
		if staleErr != nil {
			return audit.Result{}, staleErr // no integrator: what is staged stays unverifiable
		}
		return audit.Result{}, err
	}
	var stored []SourcedCheckpoint
	if err := s.scanReadOnly(ctx, func(tx pgx.Tx) error {
		var err error
		stored, err = checkpointsTx(ctx, tx)
		return err
	}); err != nil {
		return audit.Result{}, err
	}
	v := audit.NewVerifier(audit.Head{}, opts.Keys)
	for _, c := range append(stored, external...) {
		_ = v.AddCheckpoint(c.Checkpoint, c.Source) // kept for Finish
	}
	err := s.scanPages(ctx, 1, 0, func(r audit.Record) error {
		_ = v.Add(r) // every break is kept for Finish
		if opts.Progress != nil && r.Seq%10000 == 0 {
			opts.Progress(r.Seq)
		}
		return nil
	})
	if err != nil {
		return audit.Result{}, err
	}
	res, chainErr := v.Finish()
	if opts.ChainOnly {
		return res, audit.JoinBreaks(staleErr, chainErr)
	}
	if res.Events == 0 {
		return res, audit.ErrEmptyLedger
	}
	// A broken chain does not stop the other checks: each reports its
	// own breaks, and all are returned together.
	notes, treeErr := s.verifyTreeNotes(ctx, opts, res.Head.Seq)
	res.TreeNotes = notes
	// The stored tenant logs are derived from the ledger: recompute them.
	tenantErr := s.VerifyTenantLogs(ctx)
	// Tenants, clients and keys are what their last events state.
	rowErr := s.VerifyRows(ctx, opts.Keys)
	if err := audit.JoinBreaks(staleErr, chainErr, treeErr, tenantErr, rowErr); err != nil {
		return res, err
	}
	if res.Checkpoints == 0 && res.TreeNotes == 0 {
		return res, fmt.Errorf("%w: no signed checkpoint or tree note vouches for the %d events (deleted checkpoints, or a rewritten chain)",
			audit.ErrNoCheckpoint, res.Events)
	}
	return res, nil
}

// verifyTreeNotes recomputes the tree (VerifyTree: the stored hashes are
// the entries' hashes, so roots computed from them are the entries'
// roots), then checks the latest stored tree note and opts.Trusted against
// it. It returns how many notes matched.
func (s *Store) verifyTreeNotes(ctx context.Context, opts audit.VerifyOptions, size uint64) (int, error) {
	head, err := s.VerifyTree(ctx)
	if err != nil {
		return 0, err
	}
	if head.Size != size {
		return 0, &audit.BreakError{Seq: size, Reason: audit.ReasonTree,
			Detail: fmt.Sprintf("the tree has %d leaves, the verified chain %d", head.Size, size)}
	}
	var vkeys []string
	for _, pub := range opts.Keys {
		if vk, err := audit.TreeVerifierKey(s.cfg.Origin, pub); err == nil {
			vkeys = append(vkeys, vk)
		}
	}
	open := func(msg []byte) (audit.TreeHead, error) {
		err := error(audit.ErrBadSignature)
		for _, vk := range vkeys {
			var h audit.TreeHead
			if h, err = audit.OpenTreeHead(msg, vk); err == nil {
				return h, nil
			}
		}
		return audit.TreeHead{}, err
	}
	rootAt := func(n uint64) (tlog.Hash, error) {
		r, err := tlog.TreeHash(int64(n), &treeReader{ctx: ctx, q: s.scan})
		return r, translate(err)
	}
	matched := 0
	// The latest stored note that a trusted key signed is held to the
	// tree; notes of other keys (a peer node's, before the cluster shares
	// one key) vouch for nothing and are passed over, not reported broken.
	latest, err := s.latestTreeNote(ctx, open)
	if err != nil {
		return 0, err
	}
	if latest != nil {
		h := *latest
		if h.Size > size {
			return 0, &audit.BreakError{Seq: size + 1, Reason: audit.ReasonTruncated,
				Detail: fmt.Sprintf("database: the tree ends at %d but a tree note of size %d is signed", size, h.Size)}
		}
		r, err := rootAt(h.Size)
		if err != nil {
			return 0, err
		}
		if r != h.Root {
			return 0, &audit.BreakError{Seq: h.Size, Reason: audit.ReasonCheckpoint,
				Detail: fmt.Sprintf("database: tree note of size %d has another root than the entries", h.Size)}
		}
		matched++
	}
	if len(opts.Trusted) > 0 {
		h, err := open(opts.Trusted)
		if err != nil {
			return 0, fmt.Errorf("trusted %w", err)
		}
		if h.Size > size {
			return 0, fmt.Errorf("%w: the ledger has %d entries, the trusted checkpoint %d", audit.ErrSmallerTree, size, h.Size)
		}
		r, err := rootAt(h.Size)
		if err != nil {
			return 0, err
		}
		if r != h.Root {
			return 0, fmt.Errorf("%w: the ledger's tree at the trusted size %d has another root", audit.ErrFork, h.Size)
		}
		matched++
	}
	return matched, nil
}

// latestTreeNote returns the head of the largest stored tree note (of the
// last 64) that open accepts, or nil.
func (s *Store) latestTreeNote(ctx context.Context, open func([]byte) (audit.TreeHead, error)) (*audit.TreeHead, error) {
	rows, err := s.scan.Query(ctx, "SELECT note FROM tlog_checkpoints ORDER BY size DESC LIMIT 64")
	if err != nil {
		return nil, translate(err)
	}
	var notes []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, translate(err)
		}
		notes = append(notes, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	for _, n := range notes {
		if h, err := open([]byte(n)); err == nil {
			return &h, nil
		}
	}
	return nil, nil
}
