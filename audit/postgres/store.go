package postgres

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/note"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
)

// Config configures a Store.
type Config struct {
	// Origin names this ledger in its checkpoints: C2SP recommends the
	// log's URL prefix without scheme ("ledger.example.com/log"). Empty:
	// the origin the ledger's latest checkpoint records (a deployment
	// keeps its origin across restarts), else, for a ledger that never
	// signed one, audit.DefaultOrigin of SigningKey (each deployment its
	// own), else "cloison".
	Origin audit.Name
	// SigningKey signs checkpoints, and the Merkle tree's notes under the
	// key name Origin. Nil: the store writes no checkpoints (a read-only
	// verifier or exporter does not need one).
	SigningKey ed25519.PrivateKey
	// CheckpointEvery: a checkpoint after this many events appended by this
	// store (default 1000).
	CheckpointEvery int
	// CheckpointInterval: a checkpoint at least this often while events
	// arrive (default one minute).
	CheckpointInterval time.Duration
	// TreeCheckpointInterval: the Merkle tree head is signed (a C2SP
	// tlog-checkpoint note in tlog_checkpoints) after a commit batch when
	// this long has passed since the last one, and checked this often for
	// growth by other writers (default one second).
	TreeCheckpointInterval time.Duration
	// CheckpointDir receives a copy of every checkpoint, outside the
	// database. Empty: database only (tail truncation then goes undetected
	// by anyone without another copy).
	CheckpointDir string
	// TrustedTrees are tree heads of this log known outside the database
	// (cloisond: each witness's latest cosigned checkpoint, asked at
	// start). The store never signs a tree that does not extend them, nor
	// the trees and chain checkpoints in CheckpointDir (sign.go).
	TrustedTrees []TrustedTree
	// OnSigningRefused (optional) is called once, on its own goroutine,
	// with the store and the first refusal to sign (sign.go): the node
	// opens a register entry with it. Appends go on while signing is
	// refused, so the entry is recorded (under no signature until the
	// database is restored to a state the anchors accept).
	OnSigningRefused func(*Store, *SignRefusedError)
	// MaxBatch bounds the events one stager commits to audit_staging in
	// one statement (default 1024).
	MaxBatch int
	// Stagers is the number of goroutines committing staged batches
	// concurrently (default 2): no lock is shared, so their commits (and
	// other processes') share WAL flushes.
	Stagers int
	// IntegrationBound is the longest an event may stay staged, under no
	// hash, before it is sequenced (default audit.IntegrationBound, 1 s):
	// the integrator runs well within it, Sync gives up after twice it
	// (ErrPending), and Verify reports a row staged longer as a break.
	IntegrationBound time.Duration
	// IntegrateBatch bounds the staged events one integration sequences in
	// one transaction (default 8192).
	IntegrateBatch int
	// Register identifies the organisation in incidents opened
	// automatically (Règlement s. 3(1)-(2)).
	Organization audit.Organization
	Contact      audit.Contact
	// Regime is the act the register is kept under, cited in the
	// register PDF of every export whose options leave it empty (empty:
	// the private sector, P-39.1).
	Regime export.Regime
	// DetectionWindow groups automatic incidents: a detection joins the
	// open entry its cause (audit.Detection.GroupKey) opened less than this
	// long before it (default one hour; negative: one entry per detection).
	DetectionWindow time.Duration
	// Logger receives checkpoint failures (which never fail an append).
	Logger *slog.Logger
	// ScanPool serves Scan, Verify and Export, so that compliance reads
	// never take a connection from the pool appends and the register use
	// (the request path). Nil: the main pool (one tool, no request path).
	ScanPool *pgxpool.Pool
	// ScanPage bounds the rows one Scan or Verify query reads (default
	// 512): each page is a short keyset query, and the connection is back
	// in ScanPool before the caller sees the page's rows.
	ScanPage int
}

// Store is the ledger and incident register in one PostgreSQL database. It
// is safe for concurrent use by many goroutines, and several Stores (in one
// process or many) may share one database: staging takes no shared lock,
// and every sequencing (the integrator, AppendTx, the register) takes the
// ledger's advisory lock (audit_head()) before reading the head, so there
// is one chain.
type Store struct {
	pool *pgxpool.Pool // appends, head, register: the request path
	scan *pgxpool.Pool // Scan, Verify, Export (cfg.ScanPool, or pool)
	cfg  Config

	alarms sync.WaitGroup // Config.OnSigningRefused calls, waited for by Close

	reqs    chan *appendReq
	stop    chan struct{}
	stopped chan struct{}
	// Staging and integration (staging.go).
	staged     chan struct{} // closed when every stager has drained
	integrated chan struct{} // closed when the integrator has finished
	kickInt    chan struct{} // wakes the integrator (capacity 1)
	kickRes    chan struct{} // wakes the resolver (capacity 1)
	waitMu     sync.Mutex
	waiting    map[int64]*appendReq // staged id → Append waiting for its seq; guarded by waitMu
	// mu guards closed; Append holds it shared while enqueuing so that
	// nothing is enqueued after Close has begun draining.
	mu     sync.RWMutex
	closed bool

	// events signs the audit.SignedKinds with cfg.SigningKey (none
	// without it); set by Open, read-only after.
	events *audit.EventSigner

	// Tree checkpoints (nil signer: none). Guarded by noteMu.
	signer      note.Signer
	verifierKey string
	noteMu      sync.Mutex
	noteSize    uint64    // largest tree size this store signed
	noteAt      time.Time // when it last signed
	noteErr     error
	// What the store must extend (sign.go), guarded by noteMu.
	anchors      []TrustedTree
	chainAnchor  *chainAnchor
	refused      *SignRefusedError // the first refusal; nothing is signed after it
	signRefusals uint64

	fileMu   sync.Mutex // serialises writes of the tree note file
	fileSize uint64     // size of the tree note in CheckpointDir; guarded by fileMu

	// Guarded by cpMu: checkpoint bookkeeping of this store.
	cpMu      sync.Mutex
	lastHead  audit.Head // head of this store's last commit
	sinceCP   int        // events appended since the last checkpoint
	lastCP    audit.Head // last head checkpointed
	lastCPErr error
	cpCount   int
}

type appendReq struct {
	rec audit.Record
	// sequenced: Append, which answers once the event has its seq;
	// otherwise Stage, which answers once the staged row is durable.
	sequenced bool
	floor     int64     // the last integration (id) committed before the event was staged
	staged    time.Time // when its staging committed
	done      chan appendRes
}

type appendRes struct {
	rec audit.Record
	err error
}

// Open returns a Store on pool and starts its writer. The pool's sessions
// must be able to read and append (the runtime role suffices); Close stops
// the writer but does not close the pool.
func Open(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if cfg.Origin == "" {
		o, err := recordedOrigin(ctx, pool)
		switch {
		case err != nil:
			return nil, err
		case o != "":
			cfg.Origin = o
		case cfg.SigningKey != nil:
			cfg.Origin = audit.DefaultOrigin(cfg.SigningKey.Public().(ed25519.PublicKey))
		default:
			cfg.Origin = audit.LegacyOrigin
		}
	}
	if err := audit.CheckName("origin", string(cfg.Origin)); err != nil {
		return nil, err
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 1000
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = time.Minute
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1024
	}
	if cfg.Stagers <= 0 {
		cfg.Stagers = 2
	}
	if cfg.IntegrationBound <= 0 {
		cfg.IntegrationBound = audit.IntegrationBound
	}
	if cfg.IntegrateBatch <= 0 {
		cfg.IntegrateBatch = 8192
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DetectionWindow == 0 {
		cfg.DetectionWindow = time.Hour
	}
	if cfg.ScanPage <= 0 {
		cfg.ScanPage = 512
	}
	if cfg.TreeCheckpointInterval <= 0 {
		cfg.TreeCheckpointInterval = time.Second
	}
	scan := cfg.ScanPool
	if scan == nil {
		scan = pool
	}
	// Durability: Append acknowledges only committed, flushed events.
	var sc string
	if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sc); err != nil {
		return nil, translate(err)
	}
	if sc == "off" {
		return nil, cloison.Errorf(cloison.CodeInvalid, "audit/postgres: synchronous_commit is %s; the ledger needs it on", sc)
	}
	s := &Store{
		pool: pool, scan: scan, cfg: cfg,
		reqs:       make(chan *appendReq, cfg.MaxBatch*4),
		stop:       make(chan struct{}),
		stopped:    make(chan struct{}),
		staged:     make(chan struct{}),
		integrated: make(chan struct{}),
		kickInt:    make(chan struct{}, 1),
		kickRes:    make(chan struct{}, 1),
		waiting:    map[int64]*appendReq{},
		events:     audit.NewEventSigner(cfg.SigningKey),
	}
	if cfg.SigningKey != nil {
		// The tree checkpoints' key name is the origin: an origin that
		// cannot name a note key is refused here, not at the first batch.
		var err error
		if s.signer, err = audit.TreeSigner(cfg.Origin, cfg.SigningKey); err != nil {
			return nil, err
		}
		if s.verifierKey, err = audit.TreeVerifierKey(cfg.Origin, cfg.SigningKey.Public().(ed25519.PublicKey)); err != nil {
			return nil, err
		}
	}
	if err := s.ensureTree(ctx); err != nil {
		return nil, err
	}
	if s.signer != nil {
		if err := s.loadAnchors(ctx); err != nil {
			return nil, err
		}
		if err := s.proveAtOpen(ctx); err != nil && !errors.Is(err, ErrSigningRefused) {
			return nil, err
		}
	}
	s.start()
	return s, nil
}

// recordedOrigin returns the origin of the ledger's latest signed tree
// note, else of its latest checkpoint; "" when it has signed neither.
func recordedOrigin(ctx context.Context, q querier) (audit.Name, error) {
	var msg string
	err := q.QueryRow(ctx, "SELECT note FROM tlog_checkpoints ORDER BY size DESC LIMIT 1").Scan(&msg)
	if err == nil {
		first, _, _ := strings.Cut(msg, "\n")
		return audit.Name(first), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", translate(err)
	}
	err = q.QueryRow(ctx, "SELECT note FROM audit_checkpoints ORDER BY size DESC, recorded_at DESC LIMIT 1").Scan(&msg)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", translate(err)
	}
	c, err := audit.ParseCheckpoint([]byte(msg))
	if err != nil {
		return "", fmt.Errorf("%w: stored checkpoint: %v", ErrSchema, err)
	}
	return c.Origin, nil
}

// Origin returns the ledger's origin: Config.Origin, or the one Open chose
// when it was empty.
func (s *Store) Origin() audit.Name { return s.cfg.Origin }

// PrepareEvent validates e and returns its record, not yet placed in the
// chain (Seq, PrevHash and Hash unset), with its event signature when its
// kind requires one (audit.SignedKinds) and the store holds the log key:
// the bytes a definer function that appends in the same statement as a
// change (tenancy) passes to audit_sequence. AppendTx and Append prepare
// their events the same way.
//
// Errors: audit.ErrInvalidEvent and audit.ErrTextNotAllowed.
func (s *Store) PrepareEvent(e audit.Event) (audit.Record, error) { return s.events.Prepare(e) }

// Pool returns the pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close stops accepting appends, commits those already queued, writes a
// final checkpoint and returns.
func (s *Store) Close() error {
	s.alarms.Wait() // the refusal's register entry is written before the writers stop
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.stopped
	s.noteMu.Lock()
	noteErr := s.noteErr
	s.noteMu.Unlock()
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	return errors.Join(s.lastCPErr, noteErr)
}

// readWrite runs fn in a READ COMMITTED transaction, committing when fn
// returns nil and rolling back otherwise. Transactions are closures so no
// caller can forget either.
func (s *Store) readWrite(ctx context.Context, fn func(pgx.Tx) error) error {
	return translate(pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn))
}

// readOnly runs fn in a REPEATABLE READ, read-only transaction: one
// snapshot for everything fn reads. It runs on the request pool: fn must
// be short and must not wait on a client.
func (s *Store) readOnly(ctx context.Context, fn func(pgx.Tx) error) error {
	return translate(pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn))
}

// scanReadOnly is readOnly on the scan pool (exports).
func (s *Store) scanReadOnly(ctx context.Context, fn func(pgx.Tx) error) error {
	return translate(pgx.BeginTxFunc(ctx, s.scan, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn))
}

// sequenceSQL appends one batch in one statement (audit_sequence,
// migration 00012): the ledger lock, the head, the chain and Merkle tree
// hashes and the inserts all happen inside the database, so no client
// round trip happens while the lock is held: it is held for the statement
// and the commit's WAL flush only.
const sequenceSQL = "SELECT first_seq, first_prev, last_hash FROM audit_sequence($1, $2, $3, $4, $5)"

// appendInTx places prepared records after the committed head and inserts
// them, with the Merkle tree's new stored hashes, inside tx. It takes the
// ledger lock (held until tx ends). Every writer (group commit, AppendTx,
// the register) appends through sequence, so every batch advances the tree
// in its own transaction; the audit_events_tlog trigger refuses events the
// tree does not cover.
func appendInTx(ctx context.Context, tx pgx.Tx, recs []audit.Record) error {
	return sequence(ctx, tx, recs)
}

// sequence appends recs through audit_sequence on q (a pool, where the
// statement is its own transaction, committed and its WAL flushed before
// the reply; or a caller's transaction) and places recs (seq, prev_hash,
// hash) where the database put them. The chain is recomputed here from the
// first event's position and compared with the database's last hash: a
// database that hashes differently from this build is ErrSchema, never a
// silently different chain.
func sequence(ctx context.Context, q querier, recs []audit.Record) error {
	n := len(recs)
	occurred := make([]time.Time, n)
	kinds := make([]string, n)
	tenants := make([]*string, n)
	actors := make([]string, n)
	payloads := make([][]byte, n)
	for i := range recs {
		r := &recs[i]
		occurred[i] = r.OccurredAt
		kinds[i] = string(r.Kind)
		if r.Tenant != "" {
			t := string(r.Tenant)
			tenants[i] = &t
		}
		actors[i] = string(r.Actor)
		payloads[i] = r.Payload
	}
	var first int64
	var prev, last []byte
	if err := q.QueryRow(ctx, sequenceSQL, occurred, kinds, tenants, actors, payloads).Scan(&first, &prev, &last); err != nil {
		return err
	}
	head := audit.Head{Seq: uint64(first - 1)}
	copy(head.Hash[:], prev)
	for i := range recs {
		recs[i] = audit.Rechain(recs[i], head)
		head = recs[i].Head()
	}
	if string(head.Hash[:]) != string(last) {
		return fmt.Errorf("%w: the database chained seq %d to %x, this build to %x", ErrSchema, head.Seq, last, head.Hash[:])
	}
	return nil
}

// Append records e and returns its record, placed in the chain, once it is
// durable and sequenced: staged (Stage), then integrated into the chain
// and the Merkle tree by the database's integrator, which this or another
// node runs (within Config.IntegrationBound). A request that only needs
// the event durable calls Stage, which answers a flush sooner and pays no
// wait for the integrator; Append is for callers that record the seq
// (incidents name their requests' events). The record's hash is
// recomputed here from the stored prev_hash: a database that hashes
// differently from this build is ErrSchema.
//
// Errors: audit.ErrInvalidEvent and audit.ErrTextNotAllowed for an event the
// ledger refuses (nothing is written); ErrUnavailable when the database
// failed (the event may or may not be recorded, it was not acknowledged);
// ErrClosed after Close; ErrPending when the event was not sequenced within
// ten IntegrationBounds, or the store closed first (it is durable, staged);
// the context's error when ctx
// ends first (the event may still be recorded).
func (s *Store) Append(ctx context.Context, e audit.Event) (audit.Record, error) {
	return s.enqueue(ctx, e, true)
}

// Stage records e and returns once it is durable in audit_staging
// (committed with synchronous_commit on): "ledgered before the response"
// holds, and the integrator gives it its seq, chain hash and tree leaf
// within Config.IntegrationBound. The record returned has no place yet
// (Seq 0). Stages from many goroutines are committed together (group
// commit), by Config.Stagers goroutines that share no lock. What needs the
// position afterwards (Scan, proofs, a tenant's log, the served-response
// lookup) calls Sync first, or Append instead.
//
// Errors: as Append, without ErrPending.
func (s *Store) Stage(ctx context.Context, e audit.Event) (audit.Record, error) {
	return s.enqueue(ctx, e, false)
}

func (s *Store) enqueue(ctx context.Context, e audit.Event, sequenced bool) (audit.Record, error) {
	rec, err := s.events.Prepare(e)
	if err != nil {
		return audit.Record{}, err
	}
	req := &appendReq{rec: rec, sequenced: sequenced, done: make(chan appendRes, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return audit.Record{}, ErrClosed
	}
	select {
	case s.reqs <- req:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return audit.Record{}, ctx.Err()
	}
	select {
	case res := <-req.done:
		return res.rec, res.err
	case <-ctx.Done():
		return audit.Record{}, ctx.Err()
	}
}

// AppendTx appends events inside the caller's transaction tx, placed after
// the committed head: they commit or roll back with tx, so a change and its
// ledger record are one fact — if the ledger cannot record, the change does
// not happen. It takes the ledger's writer lock (audit_head(), an advisory
// lock held until tx ends), which serialises it with every Store's
// group-commit writer and with other AppendTx callers; a writer whose guess
// of the head this moved is refused by the chain trigger and rereads the
// head under the lock. Call it as the last statement of tx, after every
// other lock tx takes (a lock taken after it could deadlock with a writer),
// and commit promptly. The records returned are final only once tx
// commits. Checkpoints count these events at this store's next checkpoint.
// The events' Merkle tree hashes are inserted in tx too; the writer signs
// a tree note covering them within TreeCheckpointInterval of the commit.
//
// Errors: audit.ErrInvalidEvent and audit.ErrTextNotAllowed for an event
// the ledger refuses (nothing is written); ErrClosed after Close; otherwise
// the translated database error (ErrUnavailable, ErrChainRejected, ...),
// after which tx is aborted and must be rolled back.
func (s *Store) AppendTx(ctx context.Context, tx pgx.Tx, events ...audit.Event) ([]audit.Record, error) {
	if len(events) == 0 {
		return nil, nil
	}
	recs := make([]audit.Record, len(events))
	for i, e := range events {
		rec, err := s.events.Prepare(e)
		if err != nil {
			return nil, err
		}
		recs[i] = rec
	}
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if err := appendInTx(ctx, tx, recs); err != nil {
		return nil, translate(err)
	}
	return recs, nil
}

// Head returns the committed head of the ledger (request pool: /readyz
// and the request path read it).
func (s *Store) Head(ctx context.Context) (audit.Head, error) { return headOn(ctx, s.pool) }

func headOn(ctx context.Context, q querier) (audit.Head, error) {
	var h audit.Head
	var seq int64
	var hash []byte
	err := q.QueryRow(ctx, "SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1").Scan(&seq, &hash)
	if err == pgx.ErrNoRows {
		return audit.Head{}, nil
	}
	if err != nil {
		return h, translate(err)
	}
	h.Seq = uint64(seq)
	copy(h.Hash[:], hash)
	return h, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Scan hands fn the records with from <= seq <= to (to 0: to the head when
// Scan starts) in sequence order. It reads them in keyset pages of
// ScanPage rows on the scan pool, each page its own short query, and calls
// fn only after the page's connection is back in the pool: a caller whose
// fn blocks (a client that stops reading) holds no connection and no
// transaction. The rows are still one consistent view: the ledger is
// append-only and committed in seq order, so the rows up to the head read
// at the start are fixed.
//
// Every event staged before the call is sequenced first (Sync).
//
// Errors: ErrUnavailable (and the other translations of errors.go) when
// the database fails; ErrPending (Sync); fn's error, returned as is,
// stops the scan.
func (s *Store) Scan(ctx context.Context, from, to uint64, fn func(audit.Record) error) error {
	if err := s.Sync(ctx); err != nil {
		return err
	}
	return s.scanPages(ctx, from, to, fn)
}

func (s *Store) scanPages(ctx context.Context, from, to uint64, fn func(audit.Record) error) error {
	head, err := headOn(ctx, s.scan)
	if err != nil {
		return err
	}
	if to == 0 || to > head.Seq {
		to = head.Seq
	}
	if from == 0 {
		from = 1
	}
	page := make([]audit.Record, 0, s.cfg.ScanPage)
	for from <= to {
		page = page[:0]
		err := scanRows(ctx, s.scan, from, to, s.cfg.ScanPage, func(r audit.Record) error {
			page = append(page, r)
			return nil
		})
		if err != nil {
			return translate(err)
		}
		if len(page) == 0 {
			return nil
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		from = page[len(page)-1].Seq + 1
	}
	return nil
}

// scanRows streams the records with from <= seq <= to (to 0: no bound),
// at most limit of them (0: all), to fn.
func scanRows(ctx context.Context, q querier, from, to uint64, limit int, fn func(audit.Record) error) error {
	if to == 0 {
		to = 1<<63 - 1
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := q.Query(ctx, `SELECT seq, prev_hash, hash, kind, tenant, actor, occurred_at, recorded_at, payload
		FROM audit_events WHERE seq BETWEEN $1 AND $2 ORDER BY seq LIMIT $3`, int64(from), int64(to), lim)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		seq                  int64
		prev, hash, payload  []byte
		kind, actor          string
		tenant               *string
		occurred, recordedAt time.Time
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &prev, &hash, &kind, &tenant, &actor, &occurred, &recordedAt, &payload); err != nil {
			return err
		}
		r := audit.Record{Seq: uint64(seq), Kind: audit.Kind(kind), Actor: audit.Name(actor), OccurredAt: occurred, RecordedAt: recordedAt,
			Payload: append([]byte(nil), payload...)}
		copy(r.PrevHash[:], prev)
		copy(r.Hash[:], hash)
		if tenant != nil {
			r.Tenant = cloison.TenantID(*tenant)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Stats reports the store's checkpoint state.
type Stats struct {
	LastHead       audit.Head // head of this store's last commit
	LastCheckpoint audit.Head
	Checkpoints    int   // written by this store
	CheckpointErr  error // last checkpoint failure, if any
	// SignRefusals counts the times the store refused to sign a tree or
	// chain head contradicting a checkpoint known outside the database
	// (sign.go); SigningRefused is the refusal in force.
	SignRefusals   uint64
	SigningRefused bool
}

// Stats returns the store's bookkeeping.
func (s *Store) Stats() Stats {
	s.noteMu.Lock()
	n, refused := s.signRefusals, s.refused != nil
	s.noteMu.Unlock()
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	return Stats{LastHead: s.lastHead, LastCheckpoint: s.lastCP, Checkpoints: s.cpCount, CheckpointErr: s.lastCPErr,
		SignRefusals: n, SigningRefused: refused}
}

func (s *Store) String() string { return fmt.Sprintf("audit/postgres.Store(%s)", s.cfg.Origin) }
