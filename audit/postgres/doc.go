// Package postgres stores Cloison's audit ledger and Loi 25 incident
// register in PostgreSQL. It stores what package audit computes (canonical
// bytes, chain hashes, checkpoints, the tree steps of audit.ExtendTree and
// the tenant-log trees of audit.TenantForest) and gives audit/export the
// reads an export needs.
// The design, with the figures and the migrations that shaped it, is in
// docs/ledger.md; the SQL functions in force are in schema.sql.
//
// Guarantees:
//
//   - An acknowledged event is durable: Stage returns once its event is
//     committed (synchronous_commit on) to audit_staging; Append returns
//     once it is also sequenced, with its position and hashes. A crash
//     leaves each staged row either staged or sequenced, never both or
//     neither (audit_integrate moves rows in one transaction).
//   - One writer of the chain and the tree: every sequencing is one call
//     of audit_sequence (SECURITY DEFINER), under the ledger's advisory
//     lock, from the committed head. The runtime role cannot insert into
//     the chain or tree tables, and triggers refuse any batch that does
//     not extend the head (ErrChainRejected): no writer, however many
//     processes share the database, can fork or gap the chain.
//   - Payloads are their columns' envelopes: audit_sequence and the
//     staging table refuse (ErrPayloadRejected, migration 00026) a payload
//     that is not UTF-8 JSON of the envelope's members, or whose kind,
//     tenant, actor or occurred_at is not its column's, so the runtime
//     role cannot poison the log with bytes no verifier can read.
//   - Signed events: the Store signs the audit.SignedKinds with
//     Config.SigningKey (the log key) when it prepares them (Append,
//     Stage, AppendTx, the register's writes, PrepareEvent for callers
//     that append through their own definer function); BeginSigning
//     marks where signatures become required. A Store without the key
//     writes them unsigned, and verification names them once signing
//     began.
//   - Append-only: the ledger, checkpoint and register tables refuse
//     UPDATE, DELETE and TRUNCATE (ErrAppendOnly); a register entry is
//     deleted only by cloison_incident_purge, after its five-year
//     retention, with its incident.purged event (ErrRetention otherwise).
//     Register versions, notices and settings commit with the ledger
//     event that chains their digest.
//   - Derived state is verified, never trusted: the Merkle tree (C2SP
//     tiles), the tenant logs and request_entries are recomputed from the
//     entries by Verify (VerifyTree, VerifyTenantLogs), and every tenant
//     checkpoint is kept before it is served, so a rollback is named
//     (audit.ErrSmallerTree, audit.ErrFork). Verify fails, never warns:
//     an empty ledger or one no checkpoint vouches for is an error; it
//     reports every break it finds (audit.Breaks), chain, tree, tenant
//     logs and live rows, so one bad entry never hides another.
//   - Tenant, API client and signing key rows are what their last events
//     state: they change only through row_apply (ApplyTx: the event and
//     the row in one statement, the row written from the state document
//     the event is the digest of), and VerifyRows, part of Verify, names
//     every row that disagrees with its last event or whose event, after
//     the signing mark, is not signed by a trusted log key
//     (audit.ReasonRowState).
//   - The origin is stable: Open with no Config.Origin reuses the origin
//     of the latest stored tree note (else checkpoint), and only a ledger
//     that signed neither takes audit.DefaultOrigin of its log key
//     (Origin reports the one chosen).
//   - The served log (logtiles.go): Tile cuts a C2SP tile from the widest
//     stored row, EntryBundle builds a bundle of audit.ServedEntry from the
//     entries and checks each against the stored level-0 tile, so what is
//     served always hashes to the tree the notes sign.
//   - The store never signs what contradicts its past (sign.go): every
//     checkpoint and tree note it signs goes to Config.CheckpointDir
//     first, and before each signature it proves from the stored tiles
//     that the tree extends those files and Config.TrustedTrees (the
//     witnesses' latest cosigned checkpoints), and that the chain still
//     holds the checkpointed hash. Otherwise it refuses for good
//     (*SignRefusedError, ErrSigningRefused: error log, Stats, incident
//     file) and hands out no checkpoint: a database rewritten by its DBA
//     and a restarted node do not make a signed forgery.
//   - Compliance reads (Scan, Verify, Export, TenantEntries) run on the
//     scan pool in keyset pages and hold no connection while the caller
//     handles rows: they never wait on the request path's connections.
//   - PostgreSQL error codes are interpreted in one place (errors.go);
//     every method returns this package's or audit's sentinels.
//
// The loop that drives it (staging.go):
//
//	stager (Config.Stagers per Store):
//	for batch := range queued {
//		INSERT INTO audit_staging ...      // no shared lock; COMMIT, WAL flushed
//		acknowledge each Stage             // only now: durable
//		kick the integrator and the resolver
//	}
//	integrator (the one Store whose connection holds integratorLock):
//	for kicked, or every integratePoll {
//		audit_integrate(IntegrateBatch)    // one transaction: ledger lock,
//		                                   // DELETE staged, audit_sequence,
//		                                   // INSERT audit_integrations
//		checkpoint and tree note when due
//	}
//	resolver: answer each Append with its seq and hashes, recomputed.
//
// IndexTenantLogs brings the stored tenant logs to the head a page per
// transaction; tenant calls run it first, so no append pays for it.
//
// Ordering duties of callers:
//
//   - Migrate BEFORE Open (migrations.Up); Open refuses an unmigrated
//     database (ErrSchema). Check the deployment's keys (CheckKey, read
//     only) BEFORE Open, whose writer signs with the checkpoint key at
//     once, and record them (EnsureKey) right after; every node of a
//     cluster is given the same keys.
//   - Use Append, not Stage, for an event whose seq is recorded elsewhere
//     (an incident names its requests' seqs); Stage is for the request
//     path. What needs an acknowledged event's position syncs first
//     (Scan, Verify, Export, SignTree, TenantCheckpoint, RequestEntry);
//     proofs take sizes and seqs the caller already holds.
//   - Sign a receipt (Receipt) only over a record Stage or Append
//     RETURNED, AFTER it returned: the receipt then binds the payload
//     that is durable, never one the caller merely meant to write.
//   - AppendTx and ApplyTx are the LAST statement of the caller's transaction: every
//     other lock the transaction takes comes BEFORE the ledger lock it
//     takes, and the transaction commits promptly; its records are final
//     only once it commits.
//   - Close AFTER the last Append: Close commits what is queued and
//     writes a final checkpoint; an Append after it is ErrClosed.
//
// Files by job: store.go (Open, Append, AppendTx, Scan), staging.go (the
// loop above), tree.go and checkpoint.go (the global tree, notes and
// proofs), sign.go (what signing must extend), tenantindex.go, tenantread.go and tenantverify.go (tenant logs
// indexed, served, verified), register.go and incidenttenants.go (the
// incident register), responses.go and stored.go (reports, replays,
// stored responses), receipt.go (receipts of acknowledged entries),
// rows.go (live rows and their events), keys.go,
// witness.go, verify.go, signing.go (BeginSigning), export.go (the reads
// of audit/export), errors.go.
package postgres
