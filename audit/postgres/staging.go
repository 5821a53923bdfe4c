package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
)

// integratorLock is the session advisory lock whose holder is the
// database's integrator (one per database; any node; released with its
// connection). It is not the ledger lock (audit_head()'s), which
// audit_integrate takes per transaction like every other writer.
const integratorLock int64 = -3458794010727121272

// integrateGap is the least time between two integrations that a kick
// (a local stage commit) starts: under load, staged rows of every writer
// gather into one integration instead of one each.
const integrateGap = 2 * time.Millisecond

// integratePoll is how often the integrator looks for rows other
// processes staged, and the resolver for positions, while idle.
const integratePoll = 10 * time.Millisecond

// pendingLimit is how long, in IntegrationBounds, Append waits for its
// event's position before ErrPending (the event is durable, staged): an
// integrator that keeps failing (a tampered ledger it cannot extend, a
// database refusing) must not hang its callers.
const pendingLimit = 10

// stageSQL inserts a batch into audit_staging and returns its ids in
// input order (identity values are drawn in the order unnest yields the
// rows; a waiter that got another row's id would fail its hash check, not
// take another event's seq), the last integration (its id) committed
// before the statement's snapshot (the batch is integrated after it), and
// how long the oldest row staged before it has waited (the backlog).
const stageSQL = `WITH f AS (SELECT coalesce(max(id), 0) AS floor FROM audit_integrations),
ins AS (INSERT INTO audit_staging (occurred_at, kind, tenant, actor, payload)
        SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bytea[]) RETURNING id)
SELECT (SELECT floor FROM f), (SELECT array_agg(id ORDER BY id) FROM ins),
       coalesce((SELECT extract(epoch FROM clock_timestamp() - s.staged_at) FROM audit_staging s ORDER BY s.id LIMIT 1), 0)::float8`

// resolveSQL finds where integrations after floor placed the staged ids.
const resolveSQL = `SELECT u.id, e.seq, e.prev_hash, e.hash FROM audit_integrations i
  CROSS JOIN LATERAL unnest(i.staged_ids) WITH ORDINALITY AS u(id, o)
  JOIN audit_events e ON e.seq = i.first_seq + u.o - 1
  WHERE i.id > $1 AND u.id = ANY($2)`

// start runs the stagers, the integrator and the resolver. Close stops
// them in that order: stagers drain the queue, the integrator sequences
// what is staged, the resolver answers the Appends still waiting.
func (s *Store) start() {
	var wg sync.WaitGroup
	for i := 0; i < s.cfg.Stagers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stager()
		}()
	}
	go func() {
		wg.Wait()
		close(s.staged)
	}()
	go s.integrator()
	go func() {
		s.resolver()
		close(s.stopped)
	}()
}

// stager commits whatever is queued (up to MaxBatch) to audit_staging in
// one statement, its own transaction, and only then answers: Stage
// requests at once, Append requests once the resolver finds their seq.
func (s *Store) stager() {
	batch := make([]*appendReq, 0, s.cfg.MaxBatch)
	for {
		var first *appendReq
		select {
		case first = <-s.reqs:
		case <-s.stop:
			// Close holds mu: nothing more can be enqueued.
			for {
				batch = batch[:0]
			drain:
				for len(batch) < s.cfg.MaxBatch {
					select {
					case r := <-s.reqs:
						batch = append(batch, r)
					default:
						break drain
					}
				}
				if len(batch) == 0 {
					return
				}
				s.stage(batch)
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.stage(batch)
	}
}

// stage commits one batch and answers or registers each request. Then,
// when the oldest row staged before it had waited more than a quarter of
// the bound, it holds this stager back by the excess (at most another
// quarter): writers that outrun the integrator are slowed to its pace
// (their requests wait for the ack), so the staging window stays within
// the bound instead of growing with the backlog.
func (s *Store) stage(batch []*appendReq) {
	n := len(batch)
	occurred := make([]time.Time, n)
	kinds := make([]string, n)
	tenants := make([]*string, n)
	actors := make([]string, n)
	payloads := make([][]byte, n)
	for i, req := range batch {
		r := &req.rec
		occurred[i] = r.OccurredAt
		kinds[i] = string(r.Kind)
		if r.Tenant != "" {
			t := string(r.Tenant)
			tenants[i] = &t
		}
		actors[i] = string(r.Actor)
		payloads[i] = r.Payload
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var floor int64
	var ids []int64
	var backlog float64
	err := translate(s.pool.QueryRow(ctx, stageSQL, occurred, kinds, tenants, actors, payloads).Scan(&floor, &ids, &backlog))
	cancel()
	if err == nil && len(ids) != n {
		err = fmt.Errorf("%w: staged %d rows, got %d ids", ErrSchema, n, len(ids))
	}
	if err != nil {
		for _, r := range batch {
			r.done <- appendRes{err: err}
		}
		return
	}
	waiters := false
	s.waitMu.Lock()
	for i, r := range batch {
		if r.sequenced {
			r.floor, r.staged = floor, time.Now()
			s.waiting[ids[i]] = r
			waiters = true
		}
	}
	s.waitMu.Unlock()
	for _, r := range batch {
		if !r.sequenced {
			r.done <- appendRes{rec: r.rec}
		}
	}
	kick(s.kickInt)
	if waiters {
		kick(s.kickRes)
	}
	quarter := s.cfg.IntegrationBound / 4
	if over := time.Duration(backlog*float64(time.Second)) - quarter; over > 0 {
		time.Sleep(min(over, quarter))
	}
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// integrator contends for the integrator lock on a connection of its own
// and, while it holds it, sequences staged rows: at once when kicked (a
// local stage) and no sooner than integrateGap after the last
// integration, every integratePoll otherwise, and again at once after an
// integration that was full (IntegrateBatch). A connection that fails is
// closed, which releases the lock to another node; a node that does not
// hold it retries every IntegrationBound/4, so a dead integrator is
// replaced well within the bound. It also signs checkpoints and tree
// notes when due (it is the goroutine that sees the tree grow).
func (s *Store) integrator() {
	defer close(s.integrated)
	ticker := time.NewTicker(s.cfg.CheckpointInterval)
	defer ticker.Stop()
	treeTicker := time.NewTicker(s.cfg.TreeCheckpointInterval)
	defer treeTicker.Stop()
	poll := time.NewTicker(integratePoll)
	defer poll.Stop()
	var conn, cand *pgx.Conn // the leader's connection; the one that retries the lock
	defer func() {
		for _, c := range []*pgx.Conn{conn, cand} {
			if c != nil {
				_ = c.Close(context.Background())
			}
		}
	}()
	var lastTry, last time.Time
	for {
		select {
		case <-s.staged:
			// Stagers drained: sequence everything staged (by anyone;
			// audit_integrate takes the ledger lock, so this is safe
			// beside another integrator), then the last checkpoints.
			for i := 0; i < 1000; i++ {
				n, err := s.integrateOn(s.pool)
				if err != nil {
					s.cfg.Logger.Error("audit integration failed at close", "err", err)
					break
				}
				if n == 0 {
					break
				}
			}
			kick(s.kickRes)
			s.refreshHead()
			s.maybeCheckpoint(true)
			s.maybeSignTree(audit.TreeHead{}, true)
			return
		case <-ticker.C:
			s.refreshHead()
			s.maybeCheckpoint(true)
			continue
		case <-treeTicker.C:
			s.maybeSignTree(audit.TreeHead{}, true)
			continue
		case <-s.kickInt:
			if d := integrateGap - time.Since(last); d > 0 {
				time.Sleep(d)
			}
		case <-poll.C:
		}
		if conn == nil {
			if time.Since(lastTry) < s.cfg.IntegrationBound/4 {
				continue
			}
			lastTry = time.Now()
			if conn, cand = s.leaderConn(cand); conn == nil {
				continue
			}
		}
		for {
			last = time.Now()
			n, err := s.integrateOn(conn)
			if err != nil {
				s.cfg.Logger.Error("audit integration failed", "err", err)
				_ = conn.Close(context.Background())
				conn = nil
				break
			}
			if n > 0 {
				kick(s.kickRes)
				s.maybeSignTree(audit.TreeHead{}, false)
				s.maybeCheckpoint(false)
			}
			if n < s.cfg.IntegrateBatch {
				break
			}
		}
	}
}

// refreshHead takes the committed head as this store's last head when it
// is ahead: the events this store staged may have been integrated by
// another node, and its interval and final checkpoints cover them.
func (s *Store) refreshHead() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := headOn(ctx, s.pool)
	if err != nil {
		return
	}
	s.cpMu.Lock()
	if h.Seq > s.lastHead.Seq {
		s.lastHead = h
	}
	s.cpMu.Unlock()
}

// leaderConn tries the integrator lock on cand (nil: a connection taken
// off the pool, so that the lock lives exactly as long as it) and returns
// it as the leader's when it got the lock, or as the candidate to retry
// with when another session holds it (nil, nil when the database failed).
func (s *Store) leaderConn(cand *pgx.Conn) (leader, retry *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cand == nil {
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, nil
		}
		cand = pc.Hijack()
	}
	var got bool
	if err := cand.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", integratorLock).Scan(&got); err != nil {
		_ = cand.Close(context.Background())
		return nil, nil
	}
	if !got {
		return nil, cand
	}
	return cand, nil
}

// integrateOn runs one integration (audit_integrate, one transaction: the
// staged rows' delete and their sequencing commit together or not at all)
// and records the new head for this store's checkpoints.
func (s *Store) integrateOn(q querier) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first *int64
	var n int
	var last []byte
	if err := q.QueryRow(ctx, "SELECT first_seq, n, last_hash FROM audit_integrate($1)", s.cfg.IntegrateBatch).Scan(&first, &n, &last); err != nil {
		return 0, translate(err)
	}
	if n == 0 || first == nil {
		return 0, nil
	}
	head := audit.Head{Seq: uint64(*first) + uint64(n) - 1}
	copy(head.Hash[:], last)
	s.cpMu.Lock()
	if head.Seq > s.lastHead.Seq {
		s.lastHead = head
	}
	s.sinceCP += n
	s.cpMu.Unlock()
	return n, nil
}

// resolver answers the Appends waiting for their seq: it reads where the
// integrations after their floor placed their staged ids, and the chain
// hashes there, and recomputes each record's hash from them. It runs when
// kicked and every integratePoll while any wait; at Close, once the
// integrator has finished, it answers what remains (ErrPending after the
// bound).
func (s *Store) resolver() {
	poll := time.NewTicker(integratePoll)
	defer poll.Stop()
	closing := false
	integrated := s.integrated
	var deadline time.Time
	for {
		select {
		case <-s.kickRes:
		case <-poll.C:
		case <-integrated:
			integrated = nil // closed: once
			closing = true
			deadline = time.Now().Add(2 * s.cfg.IntegrationBound)
		}
		s.waitMu.Lock()
		pending := len(s.waiting)
		s.waitMu.Unlock()
		if pending > 0 {
			s.resolve()
			s.expire(time.Now().Add(-pendingLimit * s.cfg.IntegrationBound))
		}
		if closing {
			s.waitMu.Lock()
			left := len(s.waiting)
			if left == 0 || time.Now().After(deadline) {
				for id, r := range s.waiting {
					r.done <- appendRes{err: fmt.Errorf("%w: staged id %d", ErrPending, id)}
					delete(s.waiting, id)
				}
				s.waitMu.Unlock()
				return
			}
			s.waitMu.Unlock()
		}
	}
}

// expire answers ErrPending to the Appends staged before limit.
func (s *Store) expire(limit time.Time) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	for id, r := range s.waiting {
		if r.staged.Before(limit) {
			r.done <- appendRes{err: fmt.Errorf("%w: staged id %d not sequenced within %v", ErrPending, id, pendingLimit*s.cfg.IntegrationBound)}
			delete(s.waiting, id)
		}
	}
}

func (s *Store) resolve() {
	s.waitMu.Lock()
	ids := make([]int64, 0, len(s.waiting))
	floor := int64(-1)
	for id, r := range s.waiting {
		ids = append(ids, id)
		if floor < 0 || r.floor < floor {
			floor = r.floor
		}
	}
	s.waitMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := s.pool.Query(ctx, resolveSQL, floor, ids)
	if err != nil {
		s.cfg.Logger.Error("audit: reading integrated positions failed", "err", err)
		return
	}
	type placed struct {
		seq        int64
		prev, hash []byte
	}
	found := map[int64]placed{}
	for rows.Next() {
		var id int64
		var p placed
		if err := rows.Scan(&id, &p.seq, &p.prev, &p.hash); err != nil {
			rows.Close()
			s.cfg.Logger.Error("audit: reading integrated positions failed", "err", err)
			return
		}
		found[id] = p
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		s.cfg.Logger.Error("audit: reading integrated positions failed", "err", translate(err))
		return
	}
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	for id, p := range found {
		r, ok := s.waiting[id]
		if !ok {
			continue
		}
		delete(s.waiting, id)
		h := audit.Head{Seq: uint64(p.seq - 1)}
		copy(h.Hash[:], p.prev)
		rec := audit.Rechain(r.rec, h)
		if string(rec.Hash[:]) != string(p.hash) {
			r.done <- appendRes{err: fmt.Errorf("%w: the database chained seq %d to %x, this build to %x", ErrSchema, p.seq, p.hash, rec.Hash[:])}
			continue
		}
		r.done <- appendRes{rec: rec}
	}
}

// Sync waits until every event staged before it was called (by any node)
// is sequenced: what Scan, Export, SignTree, a tenant's log and the
// served-response lookup call first, so that an acknowledged Stage is
// seen by the reads that follow it. It waits at most twice
// Config.IntegrationBound.
//
// Errors: ErrPending when rows staged before the call are still staged at
// the bound (no integrator is running: every node is down or cut off from
// the database); ErrUnavailable; the context's error.
func (s *Store) Sync(ctx context.Context) error {
	var top *int64
	if err := s.pool.QueryRow(ctx, "SELECT max(id) FROM audit_staging").Scan(&top); err != nil {
		return translate(err)
	}
	if top == nil {
		return nil
	}
	kick(s.kickInt)
	deadline := time.Now().Add(2 * s.cfg.IntegrationBound)
	wait := time.Millisecond
	for {
		var left bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM audit_staging WHERE id <= $1)", *top).Scan(&left); err != nil {
			return translate(err)
		}
		if !left {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: rows staged up to id %d are not sequenced after %v", ErrPending, *top, 2*s.cfg.IntegrationBound)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// staleStaged reports the oldest row staged longer than bound before now
// (the database's clock) as an *audit.BreakError (audit.ReasonStaged,
// at the seq after head: where it would be sequenced), nil when none.
// Such a row is under no hash: an integrator that stopped, or an owner
// holding the row back, is a failure, never a warning.
func staleStaged(ctx context.Context, q querier, head uint64, bound time.Duration) error {
	var id int64
	var age float64
	err := q.QueryRow(ctx, `SELECT id, extract(epoch FROM clock_timestamp() - staged_at) FROM audit_staging
		WHERE staged_at < clock_timestamp() - make_interval(secs => $1) ORDER BY id LIMIT 1`, bound.Seconds()).Scan(&id, &age)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return translate(err)
	}
	return &audit.BreakError{Seq: head + 1, Reason: audit.ReasonStaged,
		Detail: fmt.Sprintf("staged row %d has waited %.1fs for integration, beyond the %v bound: it is under no hash", id, age, bound)}
}
