// Package postgres stores Cloison's audit ledger and Loi 25 incident
// register in PostgreSQL. It stores what package audit computes: canonical
// bytes and checkpoint signatures are computed in Go; the chain and tree
// hashes of an append are computed by the database in the statement that
// inserts them (audit_sequence) and recomputed in Go (the writer checks
// the chain, VerifyTree the tree); the database keeps them append-only and
// refuses anything that does not extend the chain.
//
// Guarantees:
//
//   - Append returns only after its event is committed with
//     synchronous_commit on. One writer goroutine per Store commits every
//     queued event in one statement, its own transaction (group commit).
//   - Any number of Stores, in any number of processes, may share a
//     database: every append is one call of audit_sequence (migration
//     00012), which takes the ledger's transaction-scoped advisory lock
//     (the one audit_head() takes), reads the committed head and places the
//     batch after it; an AFTER INSERT trigger refuses any batch that does
//     not extend that head with correct hashes (CL003), so even a writer
//     that skips the function and the lock cannot fork or gap the chain.
//   - audit_events, audit_checkpoints and the register tables refuse
//     UPDATE, DELETE and TRUNCATE: by privilege for the runtime role, by
//     triggers enabled ALWAYS for everyone else. Register rows are deleted
//     only by cloison_incident_purge, after five years, with an
//     incident.purged ledger event in the same transaction.
//   - Automatic incidents are grouped (OpenFromDetection, migration
//     00011): a detection joins the open entry its cause
//     (audit.Detection.GroupKey: source, check, model) opened less than
//     Config.DetectionWindow (default 1 h) before it, as a new hashed
//     version (incident.updated) appending its request ids and ledger
//     seqs; otherwise, or once an entry holds audit.MaxGroupedDetections,
//     a new entry opens. incidents.group_key/group_until (not hashed; the
//     key is also in the hashed content) only select the entry to join.
//   - The organisation and privacy officer new entries name are register
//     settings (SetRegisterSettings, the admin API's PUT
//     /admin/v1/register/organisation and SetRegisterSettings over gRPC):
//     append-only register_settings rows of canonical
//     audit.RegisterSettings, each with a register.settings_set ledger
//     event (version and digest only) in the same transaction; the latest
//     is checked against its event before use, and VerifyRegister checks
//     every version against its event (and every event has its version).
//     Before any is set, Config.Organization and Config.Contact.
//   - Every CheckpointEvery events or CheckpointInterval, a signed
//     checkpoint is written to CheckpointDir (outside the database) and
//     stored in audit_checkpoints. Verify reads the whole chain and checks
//     every hash and every checkpoint, stored and external.
//   - The Merkle tree's stored hashes (tlog.StoredHashes, one row per
//     tlog.StoredHashIndex) are in tlog_hashes (migration 00005), inserted
//     in the same transaction as the events they cover by every writer
//     (group commit, AppendTx, incident opened/updated, notice, purge: all
//     go through sequence, i.e. audit_sequence, under the ledger lock).
//     audit_sequence computes them in the database (tlog.StoredHashes'
//     formulas, from the frontier it reads in one query), and the caller
//     recomputes the chain in Go and compares the last hash (ErrSchema if
//     they differ). tlog_hashes is append-only like audit_events, inserted
//     densely (trigger), and an AFTER INSERT trigger on audit_events refuses
//     events the tree does not exactly cover (CL006 → ErrChainRejected), so
//     a writer that skips the tree fails closed. Open computes the tree of
//     a ledger written before it existed (in Go).
//   - Tree checkpoints (signed notes, audit.SignTreeHead) are stored in
//     tlog_checkpoints (append-only): the writer signs the committed tree
//     after a batch when TreeCheckpointInterval (default 1s) has passed
//     since its last note, and on that tick when other writers (register,
//     AppendTx, other processes) grew it; SignTree signs now. TreeCheckpoint
//     returns the latest; InclusionProof and ConsistencyProof serve
//     tlog proofs from the committed tree and refuse sizes it does not have
//     (ErrOutOfRange, audit.ErrEmptyLedger). The key is the checkpoint key
//     (SigningKey), named by Origin (which must not contain '+').
//   - Tenant logs (tenantlog.go, migration 00013): each tenant's log
//     (audit.TenantLeaf: its entries, incidents and notices, redacted where
//     they name other tenants) is stored as a tree of its own —
//     tenant_log_entries (tenant, position → ledger seq) and
//     tenant_log_hashes (its tlog stored hashes) — derived from the
//     committed ledger, never by the append path, so appends pay nothing:
//     IndexTenantLogs reads the entries after the watermark
//     (tenant_log_indexed) in seq order, a page per transaction under an
//     advisory lock (any number of nodes may call it), and commits their
//     rows with the new watermark. TenantCheckpoint indexes to the head
//     first, then reads the tenant's size and O(log n) hashes; the proofs
//     read O(log n) hashes and the one ledger entry, whose leaf they
//     recompute and hold to the stored leaf hash (audit.ReasonTenantLog
//     otherwise), indexing first only when asked past the stored log. A
//     call costs the entries appended since the previous call, not a
//     ledger scan. Verify recomputes every stored row from the ledger
//     (VerifyTenantLogs: positions, hashes, and their counts), so rows
//     edited, removed or added behind the triggers are reported.
//   - Incident events name the tenants the entry affects (every version's
//     affected tenants so far), which is what puts them in the tenants'
//     logs; VerifyRegister holds each event's tenants to the register's
//     versions (events written before migration 00013 name none and are
//     accepted until the first that does).
//   - Verify refuses an empty ledger (audit.ErrEmptyLedger) and a ledger
//     that no checkpoint or tree note vouches for (audit.ErrNoCheckpoint);
//     it also recomputes the tree, checks the latest tree note, and holds
//     the tree to VerifyOptions.Trusted (audit.ErrSmallerTree,
//     audit.ErrFork). ChainOnly is for tests of the chain alone.
//   - Witness cosignatures (migration 00007, audit/witness) are kept in
//     tlog_cosignatures (append-only, one row per checkpoint size and
//     witness, verified before insertion): StoreCosignature, WitnessedSize
//     (where a submitter resumes), CosignedCheckpoint(min) (the largest
//     checkpoint with at least min cosignatures, lines appended: what
//     audit.VerifyCosigned checks).
//   - VerifyTree recomputes the tree from the entries alone and compares
//     every stored hash (audit.ReasonTree at the first entry that differs):
//     the database does not recompute tree hashes itself, so this is the
//     check that the stored tree, and so every note signed from it, is the
//     tree of the stored entries.
//   - Compliance reads never wait on, or hold, the request path's
//     connections: Scan, Verify and Export run on Config.ScanPool, in
//     keyset pages of ScanPage rows, each its own short query, with no
//     transaction held across pages and no connection held while the
//     caller handles rows. They are consistent all the same: rows up to
//     the head read at the start are fixed (append-only, committed in seq
//     order under the ledger lock).
//   - Register versions and notices are written in the same transaction as
//     the ledger event that chains their digest.
//   - Several writer processes (a cluster's nodes) share one ledger
//     (issue 13 §6). The ledger lock is held from audit_sequence's start to
//     the end of its commit's WAL flush, so commits of different writers
//     are serial: throughput is at most the batch size over (statement +
//     flush), and a batch is what one process had waiting. audit_sequence
//     keeps that hold as short as one statement can: no client round trip
//     happens inside it (before migration 00012 the writer read the head
//     and the tree hashes, computed in Go and sent them back: two round
//     trips under the lock, each also waiting for the client process to be
//     scheduled, which on a loaded machine dominated), and nothing outside
//     the statement waits for the lock. BenchmarkLedgerFourWriters (make
//     bench-ledger) measures it with four processes beside raw pgx.Batch
//     inserts; the figures and the design weighed against this one follow
//     the list.
//   - The deployment's keys (deployment_keys, migration 00008: checkpoint
//     key, KEK, cluster key; ids and digests only): EnsureKey records a
//     key's creation, rotation (the new key key.rotated, the old
//     key.revoked) with its ledger events in one transaction, under an
//     advisory lock taken before the ledger lock; CheckKey is the same
//     decision read-only, for a node to refuse a foreign key before Open
//     (whose writer signs tree notes on its own). A cluster shares one
//     checkpoint key: every node's Verify then accepts its peers'
//     checkpoints (VerifyOptions.Keys holds the current and earlier keys).
//   - AppendTx appends inside a caller's transaction (a tenancy change and
//     its event commit together or not at all), under the same lock and
//     chain check as every other writer (audit_sequence): no writer
//     guesses the head, so none has to notice that AppendTx moved it.
//   - Responses (responses.go, issue 17). RequestEntry finds a request's
//     request.completed entry in its tenant's log and proves it (the
//     checkpoint signed now, the inclusion proof): another tenant's id is
//     ErrNotFound like an unknown one. RecordReport writes, in one
//     transaction, the potential incident a report opens (incident.opened,
//     under assessment), report.received and the response_reports row
//     (migration 00014: the attached text sealed, never in the ledger);
//     one report per (tenant, request), a second returns the first; at
//     most ReportLimit.N per tenant per window, counted in the database
//     under a per-tenant advisory lock so the limit holds across nodes
//     (ErrReportRate). RecordReplay appends request.replayed and, for a
//     reported request, the entry's new version and the report's verdict,
//     in one transaction.
//   - Stored responses (stored.go, issue 15 §2, migration 00020).
//     StoreResponse inserts a Responses API response sealed by the API and
//     appends response.stored (id, request, SHA-256 of the blob, size) in
//     one transaction; DeleteResponse deletes it and appends
//     response.deleted in one; every read and delete names the tenant, so
//     another tenant's id is ErrNotFound like an unknown one.
//
// Throughput, measured and weighed (issue 13 §6). BenchmarkLedgerFourWriters
// on the 2-vCPU machine this was built on, shared with other builds,
// alternating old and new, 20,000 events, 4x64 requests in flight: at load
// average 23-40 the writer before migration 00012 made 1,091-1,109
// appends/s (0.12-0.14 of the raw pgx.Batch rows/s of the same run) and
// audit_sequence 1,377-1,581 (0.23-0.27); at load 9-14, 1,650-2,118 and
// 1,832-2,978; at load 7.5, 2,596 (0.14 of 18,803 raw, p99 385 ms) and
// 4,559 (0.23 of 20,210 raw, p99 162 ms). With 4x16 in flight (batches of
// at most 16) audit_sequence made 521-891. Every figure there is bound by
// CPU share, not by the design: the raw baseline (four unlocked
// connections) itself reached only 5-14k rows/s, and a serial writer gets
// one backend's share of the CPU where the baseline gets four. Latency in
// a closed loop is requests in flight over throughput (Little's law), so
// the 5 ms p99 target needs at most 100 requests in flight at 20,000/s.
//
// The bound the design sets is the flush under the lock: k events per
// commit, one commit at a time across the cluster, so events/s ≤ k /
// (statement(k) + flush). Two designs lift it; neither is built here:
//
//   - Commit the sequencing transaction with synchronous_commit off under
//     SET LOCAL (the lock is released when the commit record is written,
//     not flushed) and acknowledge only after a following synchronous
//     transaction that writes WAL has committed: WAL is flushed in order,
//     so that flush covers the batch, and the flush waits of all writers
//     are shared by PostgreSQL's group flush outside the lock. The cost is
//     that other sessions see the batch up to one flush before it is
//     durable: whatever publishes what it read (tree notes, exports,
//     proofs, witness submissions) must do so only after a synchronous
//     commit of its own, or a crash in that window rewinds a published
//     tree (a fork). That audit is the work left. Measured as an
//     experiment (not built: its flush is forced by
//     pg_logical_emit_message(true, ...), whose flush on commit was not
//     proven): 8,120 appends/s at load 7.5 (0.31 of raw, p99 87 ms) beside
//     the 4,559 above; 4,571-9,639 at load 9-10.
//   - Trillian Tessera's: writers insert durably into an unsequenced queue
//     with no global lock, and one elected sequencer integrates queued
//     entries into chain and tree in large batches within a bound. Append
//     could then no longer return the entry's seq and hash when it returns
//     (the incident register records the seqs of the requests' events,
//     api/incident.go; register purges and settings store their event's
//     seq in the same transaction), so those writers would still need the
//     lock and a second path, and Verify a pending window.
//
// PostgreSQL errors are translated to this package's sentinels in one
// place (errors.go); transactions are closures (readWrite, readOnly). A
// database that refuses or lost the connection (internal/pgstate) is
// ErrUnavailable, whose public message names no host, database or SQLSTATE:
// the driver's text is its private cause.
//
// The loop (Store.writer):
//
//	for batch := range queued {          // everything waiting, up to MaxBatch
//		SELECT * FROM audit_sequence(arrays) // one statement, its own
//		    // transaction: lock; head; chain hashes; frontier (one read);
//		    // tree hashes; INSERT tlog_hashes, then audit_events (the
//		    // triggers re-check chain and tree); COMMIT, WAL flushed
//		recompute the chain from the placement, compare the last hash
//		acknowledge each Append           // only now: durable
//		checkpoint and tree note when due
//	}
//
// # Serving and verifying
//
// Register versions are kept five years after the (end of the) date of
// awareness — an earlier delete is refused by the database; PurgeIncident
// (owner role) writes incident.purged and deletes in one transaction.
// VerifyRegister reconciles register and ledger; OpenFromDetection is what the
// engine's OnIncident hook calls (through the API). Proofs are checked by
// anyone holding the verifier key with note.Open, tlog.CheckRecord and
// tlog.CheckTree.
//
// The tree is served on /compliance/v1/tlog/... and gRPC
// cloison.tlog.v1.TransparencyLogService (api/tlog.go): the public verifier
// key; the global checkpoint and proofs (compliance:read + admin); and each
// tenant's own log — its entries only, positions instead of global seqs, its
// own signed checkpoints (compliance:read, own tenant).
//
//	cloisonctl audit verify --server URL --verifier-key K --trusted FILE [--tenant T] [--entry N]
//
// checks signature, consistency from the trusted checkpoint and inclusion;
// without --server it verifies the database and, with --trusted, demands the
// tree extend the trusted note. A smaller tree, a fork, no checkpoint or an
// empty ledger fails (exit 3), never warns.
package postgres
