// Package audit is Cloison's tamper-evident ledger and its Loi 25
// confidentiality-incident register, computed in pure Go: no I/O, no
// database. audit/postgres stores what this package computes.
//
// Guarantees:
//
//   - Every event is stored as the exact RFC 8785 canonical JSON of an
//     envelope {v, kind, occurred_at, tenant, actor, data}; Canonicalize is
//     strict (I-JSON) and idempotent.
//   - Events form a hash chain: hash = SHA-256(DomainTag ‖ seq (8 bytes,
//     big-endian) ‖ prev_hash ‖ SHA-256(payload)), prev_hash of seq 1 is 32
//     zero bytes. Changing, removing, inserting or reordering any event
//     changes every later hash.
//   - Checkpoints are Ed25519-signed statements of (size, head hash). Kept
//     outside the database, they make a truncated or fully recomputed chain
//     detectable by anyone holding the public key.
//   - The ledger is also an RFC 6962 Merkle tree (tree.go, with
//     golang.org/x/mod/sumdb/tlog): leaf n is tlog.RecordHash of the
//     canonical payload of seq n+1, the bytes the chain hashes. Tree heads
//     are C2SP tlog-checkpoint signed notes ("<origin>\n<size>\n<base64
//     root>\n", golang.org/x/mod/sumdb/note, Ed25519, key name = origin,
//     TreeVerifierKey is the published key), readable by any note/tlog
//     client. VerifyInclusion and VerifyConsistency check proofs against
//     them and fail — never warn — with a named error: ErrNoCheckpoint (no
//     checkpoint given), ErrEmptyLedger (size 0), ErrSmallerTree (smaller
//     than the trusted one: truncation, rollback), ErrFork (same size and
//     another root, or a failing consistency proof: a rewrite, a rollback
//     then new entries), ErrNotIncluded, ErrBadSignature. They trust the
//     verifier key and the caller's earlier checkpoint only.
//   - Tenant logs (tenantlog.go, tenantleaf.go). Tenant t's log holds,
//     in ledger order, every entry that names t (TenantsNamed): its tenant
//     column, an isolation violation's affected_tenants, the tenants an
//     incident event affects (IncidentOpened/Updated/Purged.Tenants: a
//     version's affected tenants, and every tenant earlier versions named),
//     the tenant a notice was sent to — its requests, its incidents and
//     its notices. Its leaf there (TenantLeaf) is the entry's canonical
//     payload, the same leaf hash as in the global tree, when t is the
//     only tenant it names; otherwise a TenantView written for t: the
//     other tenants counted (other_tenants), never named, only the fields
//     that say nothing of them (no content digest, which hashes a version
//     naming them; the violating request only when it is t's own), and
//     the global entry's chain hash (entry) binding the view to it. An
//     auditor finds that entry by its hash and recomputes the view; a
//     tenant cannot open the hash (it covers the previous entry's hash),
//     so it confirms no guess at the co-victims, as a payload digest
//     would. Kinds with no redaction never enter a log that way (fail
//     closed). The log is an RFC 6962 tree of its own; its heads are C2SP
//     notes with origin "<origin>/tenant/<t>" (TenantOrigin), signed by
//     the log key under a note key name equal to that origin
//     (TenantSigner: C2SP tlog-checkpoint's key name = origin), so the
//     tenant's verifier key is the published key renamed
//     (TenantVerifierKey: anyone derives it, nothing more is published),
//     and key name and origin line keep the logs apart (OpenTenantHead
//     refuses a global or another tenant's note). Tenant checkpoints
//     signed before were signed under the log's key name; OpenTenantHead
//     still opens them (same Ed25519 key, same origin line), so a tenant's
//     saved checkpoint stays a trusted starting point. A tenant's proofs carry positions 1..n in its own
//     log, never a global seq (which would count other tenants' entries
//     between two of its own), and every hash in them is computed from
//     its own leaves alone (property-tested), so nothing of another
//     tenant's entries is reachable from them. A tenant's ledger listing
//     is its log (api: GET /compliance/v1/ledger; cloisonctl audit log
//     --tenant): row i is leaf i, its bytes as hashed, so the tenant
//     checks any row it reads with the proof for the same number.
//     audit/postgres stores the tenant trees, derived from the ledger and
//     recomputed by Verify, and keeps every tenant checkpoint it served, so
//     Verify names a tenant log rolled back below one (ErrSmallerTree).
//   - Origins (checkpoint.go). A deployment names its log by its origin,
//     which every note, witness and tenant origin carries, so it never
//     changes once recorded: with none configured, audit/postgres reuses
//     the origin of the ledger's latest signed note, and a ledger that
//     signed none takes DefaultOrigin ("cloison/<KeyID of the log key>"),
//     so no two deployments share one (LegacyOrigin "cloison", every
//     deployment's before, stays with the ledgers that recorded it).
//     C2SP recommends the log's URL without scheme ("host/log"): an
//     operator who publishes the log sets it before the first start.
//   - The served log (logtiles.go; api: /log/). The global tree is served
//     as a C2SP tlog-tiles log to anyone, without a token: the latest
//     checkpoint, the tiles as stored, and entry bundles. What a co-tenant
//     or outsider learns from it: the tree's size and hashes (how many
//     entries the whole deployment records, over time) and, in full, only
//     the entries ServedPublic admits — deployment facts of a listed kind
//     (node capacity, signing keys, policy bundle, exports, the register's
//     organisation) that name no tenant. Every other entry is served as
//     its 32-byte leaf hash (ServedEntry), which the level-0 tile already
//     shows: no tenant id, request id, model or count per tenant. The
//     leaf hash is not salted (the tree is fixed): it confirms a guess of
//     an entry's whole canonical payload, timestamp to the microsecond and
//     ids included, which for requests (random ids, keyed digests) is out
//     of reach and for admin events costs a search over their time.
//     The leaf is still the canonical payload, so a monitor checks a
//     bundle against the signed tree entry by entry: a 32-byte entry is
//     the leaf hash and must equal the tile's, any other entry must hash
//     to it (CutServedEntry; torchwood's WithCutEntry takes it as is); a
//     stock client that hashes every entry verifies the public ones and
//     refuses the hashed ones, never accepts a wrong one. Tenants read
//     their own entries in full through their tenant logs.
//   - Trees grown a page at a time (treestep.go, tenantforest.go) are the
//     trees built whole (property-tested against MemTree): ExtendTree
//     places a batch on the global tree from the previous batch's
//     frontier, TilesOfGrowth gives the C2SP tiles it writes, and
//     TenantForest grows every tenant log from TenantLogLeaves. A store
//     keeps their output and a verifier recomputes it with the same code.
//
// Who verifies what (the trust argument):
//
//   - An outsider (auditor, witness) holding the published verifier key
//     and an earlier checkpoint checks a new global checkpoint's signature
//     and a consistency proof from the old one (VerifyConsistency): a
//     truncated, rolled-back, rewritten or forked log fails with
//     ErrSmallerTree or ErrFork. Without earlier state it learns only that
//     the key holder signed this tree; that the key holder never signs two
//     views is what witnesses add (audit/witness).
//   - A tenant holding its own tenant checkpoint does the same for its own
//     log (VerifyTenantConsistency, VerifyTenantInclusion): none of its
//     entries can be removed, changed or reordered without a failing
//     consistency proof against what it holds.
//   - The tenant log is bound to the global log by construction, not by a
//     second commitment: it is a deterministic function of the global
//     log's entries (TenantLeaf, in order). Whoever holds the global log
//     (the operator, an auditor with an export) recomputes every tenant
//     log, and a signed tenant checkpoint (n, root) whose root is not that
//     of the first n visible entries of the global log is a statement the
//     key holder signed and cannot deny: the tenant hands it, with its
//     inclusion proof, to an auditor, who checks it against the witnessed
//     global log. The tenant checkpoint carries no global size, so it
//     leaks nothing of others' traffic. What the tenant alone cannot see is
//     whether an entry of its own was left out of the global log before it
//     first fetched a checkpoint; an auditor can.
//   - The operator's own check (audit/postgres Store.Verify) recomputes
//     chain and tree and holds them to the checkpoints and tree notes
//     present, and to a trusted note given to it; it refuses an empty
//     ledger and a ledger no signature vouches for (ErrEmptyLedger,
//     ErrNoCheckpoint). Without a trusted note from outside the database,
//     a tail deleted after the last stored checkpoint is undetectable:
//     that is why verifiers keep state (cloisonctl audit verify --trusted).
//   - The log itself never signs a tree inconsistent with one it signed
//     (C2SP tlog-checkpoint). The database is not its memory: a DBA
//     without the key can rebuild the events through audit_sequence,
//     delete every stored checkpoint and restart the node. Before signing,
//     audit/postgres proves that the tree and chain extend what it knows
//     outside the database: the checkpoints and the latest tree note in
//     its state directory (written before the database row), and each
//     witness's latest cosigned checkpoint, asked of the witness at start.
//     On a contradiction it refuses for good (SignRefusedError: an error
//     log, a metric, an incident file in the state directory) and serves
//     no checkpoint, cosignature or proof: appends go on, verification
//     fails closed.
//   - The staging window (IntegrationBound). A writer may acknowledge an
//     event once it is durable but not yet sequenced (audit/postgres
//     Store.Stage: a staging table, integrated into chain and tree by one
//     integrator per database). Until it is integrated the event is under
//     no hash, no checkpoint and no proof: the database owner could
//     delete it, and no verifier could tell. The window is bounded:
//     writers integrate within IntegrationBound (1 s), and a verifier
//     that finds an event staged longer reports a break (ReasonStaged),
//     never a warning. Once integrated it is covered like every other
//     entry; what a verifier holds from before (a checkpoint, a proof)
//     never covers staged events.
//   - Receipts (receipt.go): the promise that closes the staging window
//     and the tail after the last checkpoint to whoever holds one. A node
//     acknowledges a request once its request.completed is staged, under
//     no hash yet; with the answer it hands the client a Receipt signed by
//     the log key (a note whose text begins ReceiptDomain, so it can never
//     pass for a checkpoint or a cosignature): the entry's leaf hash
//     (LeafHash of the payload the writer staged), tenant, request, kind,
//     time, and deadline = time + MaxMergeDelay (one minute). Like a signed
//     certificate timestamp (RFC 6962 s. 3), it promises inclusion within
//     a maximum merge delay rather than stating a position: the position
//     is given by the integrator after the answer leaves, and the staging
//     row's id is the database's, which proves nothing to an outsider;
//     the leaf hash is known at acknowledgement and is what a verifier
//     finds. The bound covers integration (IntegrationBound), the next
//     tree note (a second) and the witnesses' round (a second), with room
//     for another node's integrator to take over a dead node's staged
//     rows. CheckReceipts holds receipts to a verified log: included,
//     pending (deadline not passed), or missing — a *ReceiptsError naming
//     each request and leaf (ErrReceiptBroken). A tail the database owner
//     cut after the last checkpoint, with its tree, notes and tenant logs,
//     leaves the database self-consistent; a receipt makes it a named
//     failure. What a receipt cannot do: speak for requests whose client
//     kept no receipt, or for refused requests (never acknowledged).
//   - Witness cosignatures (cosignature.go, C2SP tlog-cosignature,
//     cosignature/v1 Ed25519: "— <witness> base64(key hash ‖ timestamp ‖
//     sig)" over "cosignature/v1\ntime <t>\n<checkpoint body>"; a witness's
//     vkey is CosignerVerifierKey). VerifyCosigned(note, logKey,
//     witnessKeys, k) checks the log's signature and at least k valid
//     cosignatures by distinct trusted witnesses (ErrTooFewCosignatures
//     otherwise; unknown, repeated or broken lines never count).
//     Trust model: the log key proves the operator signed a tree head; a
//     consistency proof proves a head extends one the verifier kept; a
//     witness (audit/witness) keeps that state for verifiers that keep
//     none: it cosigns only a head it has checked consistent with the last
//     one it cosigned, so a cosigned head cannot be followed, for anyone
//     who checks cosignatures, by a truncated, rolled-back or forked tree
//     without the witness refusing. It proves append-only history, not
//     the entries' content, and k independent witnesses are needed to
//     stop an operator colluding with k-1 of them from showing two views.
//     Witnesses are asked, not remembered: cosignatures stored in the
//     log's database survive a rollback of that database (the old
//     cosigned tree is a prefix of the fork that follows it). A stateless
//     verifier requiring k witnesses asks each for the latest checkpoint it
//     cosigned (audit/witness Client.Latest, VerifyWitnessed) and demands
//     consistency with every answer, or accepts stored cosignatures only
//     when younger than a bound (ErrStaleCosignature).
//   - Verifier streams a chain in constant memory and reports every
//     break it finds (*Breaks, each a *BreakError: seq and why, at most
//     MaxBreaks kept and the rest counted). A break never stops it: each
//     row is checked against the stored row before it and on its own, and
//     the chain goes on from the stored hash, so a poisoned entry (a
//     payload that is not JSON) cannot hide a tamper further down the log.
//   - Event signatures (eventsig.go). The chain, the tree and the
//     checkpoints prove that entries were not changed after they were
//     signed into a checkpoint; they say nothing of who wrote an entry.
//     The runtime role can append (it must: the node runs as it), so
//     without more it could add a notice.sent "by admin:officer-x", a
//     tenant change or a key retirement that the next checkpoint would
//     vouch for. The events that state an actor's decision, a change of
//     the register or of the deployment's principals (SignedKinds, one
//     table with why for each) are therefore signed by the node that
//     writes them, with the deployment's log key (purpose checkpoint):
//     every node holds it, it never enters the database, and every
//     verifier already trusts its public key, so no new key is
//     distributed. The signature is Ed25519 over EventSigDomain
//     ("cloison-event/v1\n") followed by the canonical envelope without
//     its signature; its domain keeps it apart from checkpoints, tree
//     notes and cosignatures signed by the same key. It is carried inside
//     the envelope ("sig": "<key id>:<base64>"), so the chain hash and the
//     tree leaf cover it like every other field and an entry's bytes
//     stay self-contained (an export verifies it offline). Per event, not
//     per integrated batch: the integrator sequences whatever is staged,
//     and the runtime role can stage, so a batch signature would vouch
//     for a forgery; the writer that builds an event signs it before it
//     is staged (EventSigner, in audit/postgres's Append, Stage, AppendTx
//     and PrepareEvent). The request path's kinds (request.completed,
//     policy.decision, admission.rejected, policy.refusals, response.*)
//     are not signed: they are one per request, they state no
//     administrator's act, and what a tenant was served is bound by its
//     own tenant log and receipts; signing them would add an Ed25519
//     verification per request to every full verification.
//     Signatures are required from where signing began: the first
//     ledger.signing_began event (SigningBegan, written by a node when it
//     opens the ledger, signed, stating its own seq) or the first event
//     with a valid signature, whichever comes first. A ledger written
//     before has unsigned admin events; they stay before the mark and are
//     accepted as what they were. The mark cannot be moved: it is signed
//     and states its seq, so a copy elsewhere is a break; the runtime role
//     can only append after it; and a DBA who rewrote the log to put it
//     later would have to drop every signed entry before the new place
//     (the first valid signature also begins signing) and rewrite the
//     chain under checkpoints and tree notes signed before, which the
//     node's and the witnesses' copies contradict. After the mark, a
//     signed kind without a valid signature by a trusted key is a break
//     (ReasonSignature), as is a bad signature anywhere. A verifier of an
//     exported range that starts after the mark sees signing begin at the
//     range's first signed entry: an unsigned forgery before it in the
//     range is not named (the manifest does not yet carry the mark's seq).
//     A signed event can be copied (replayed) whole by the runtime role:
//     its occurred_at then lies far from when it was sequenced, which the
//     next rule names, and within the tolerance the copy is a second
//     identical statement of an act that did happen.
//   - Backdating. Each entry's recorded_at is the database's clock when
//     audit_sequence inserted it (clock_timestamp(), a column the runtime
//     role cannot write; not hashed). After signing began, an entry whose
//     occurred_at is more than ClockTolerance (5 minutes) from it is a
//     break (ReasonBackdated): writers stamp events when they build them
//     and integrate them within IntegrationBound, so the tolerance covers
//     clock skew and a retried commit with room. A notice.sent's
//     occurred_at is the date the notice was sent, stated by the officer,
//     and an export.created's the start of a possibly long export
//     (StatedTimeKinds): they are exempt, and signed. Against a DBA, who can
//     rewrite recorded_at, the rule proves nothing; the signature does.
//   - IncidentFile.ForTenant is the only view of the register meant for a
//     tenant: other affected tenants are counted, not named; only the
//     notices addressed to that tenant remain; no ledger sequence number,
//     stored canonical bytes or their digest (which would confirm a guess
//     at the other tenants' ids).
//   - Never prompt or completion text: Payload is a sealed interface whose
//     types hold counts, identifiers (Name: no spaces, at most 128 of
//     [A-Za-z0-9._:/@+-]), enumerations and digests only. The incident
//     register's free text lives in register rows; the ledger holds the
//     SHA-256 of each register version.
//   - What was served (served.go). request.completed carries
//     Served: HMAC-SHA256 digests of the prompt's token ids, of the
//     completion's ids and of its bytes as sent, under a key of the
//     request's tenant (DigestKey: HKDF-SHA256 of the key-encryption key,
//     the tenant and a key id, each digest domain-tagged), with every
//     parameter that determines the output (sampling values as exact
//     decimal strings, the seed and whether the client or the server chose
//     it, max_tokens after the tenant's limits, the StopDigest of the stop
//     strings), the model file's SHA-256, the backend and its kernel path.
//     Without the key, a digest of a short prompt cannot be searched by a
//     reader of the ledger; the key id is recorded, so rotating (a new id)
//     leaves older entries checkable. A tenant holding its prompt and
//     completion checks them against its entry and the entry against its
//     tenant log (VerifyTenantInclusion) — proof, checkable offline, of what
//     it was served.
//   - Reports and replays (report.go). report.received
//     names a report, the request, a reason from ReportReasons and the
//     register entry it opened (ReportVersion: source tenant_report, status
//     under_assessment, the request and its day prefilled); any text the
//     tenant attached is sealed in the register database under ReportKey,
//     never here. request.replayed records a replay's verdict —
//     not-isolation-failure (the replay alone produced exactly the
//     completion digest served), confirmed (it did not, on a deterministic
//     path), inconclusive with the reason — the replayed completion's
//     keyed digest, and the cost (replay and original micros); ApplyReplay
//     writes the verdict into the entry (closed with the evidence, opened
//     with the assessment prefilled, or left under assessment).
//     What a replay proves: on a batch-invariant backend (kernels/cpu) the
//     tokens of a request depend only on its prompt, parameters and model,
//     so equal digests show that what was served is the prompt's own output
//     (no other request's KV reached it), and different ones that something
//     else did. It cannot prove anything on a backend not known
//     batch-invariant, on another model file or kernel path, or for an
//     entry without digests: those are inconclusive. It says nothing about
//     requests never reported or replayed, nor about what another tenant's
//     request leaked to: only the receiving side's output is compared.
//   - Notice deadlines (noticedue.go). IncidentFile.NoticeDues
//     lists, for each tenant some version names, its art. 18.3 notice
//     against the tenant's contractual deadline (hours; 0: none agreed,
//     listed as no_deadline, never dropped): the clock starts at
//     awareness (ClockFrom: the start of the awareness day, or the
//     entry's opening when it was opened that day), never later than the
//     first version naming the tenant (a tenant named then dropped is
//     still owed its notice), DueAt is that plus the deadline, and the first notice recorded to that tenant decides
//     sent_on_time (at or before DueAt) or sent_late; with none sent it is
//     overdue once now is past DueAt, pending before. Notices to other
//     recipients or tenants never count. It is computed, not stored: the
//     deadline applied is the tenant's current one (a contract change moves
//     the due time of notices not yet sent), and the notice dates are the
//     register's own (NoticeRecord, under the ledger's hash).
//   - Refused requests are not one event each: policy.refusals
//     (PolicyRefusals) sums one tenant's refusals over a window by stage and
//     code; its counts must add up to its total and be sorted, so one
//     summary has one encoding. Like every event it is a leaf of the hash
//     chain, so the signed checkpoints vouch for it.
//
// The loop that drives it (audit/postgres does this under a lock):
//
//	head := lastStoredHead()
//	for _, e := range batch {
//		rec, err := head.Next(e) // canonical bytes, seq, prev_hash, hash
//		if err != nil { refuse e }
//		store(rec)               // BEFORE acknowledging e
//		head = rec.Head()
//	}
//	commit, then acknowledge; every N events or T seconds:
//	cp, _ := audit.SignCheckpoint(key, origin, head, now) // store + copy outside
//
// # Details
//
// The domain tag of the event hash is "CLOISON-AUDIT-EVENT-V1". Event kinds:
// policy.decision, policy.refusals, policy.reloaded, admission.rejected,
// request.completed, isolation.violation, transfer.verification_failed,
// capacity.attestation, incident.opened|updated|purged, notice.sent,
// tenant.created|updated|disabled, key.created|rotated|revoked,
// client.created|revoked, token.revoked, export.created,
// ledger.signing_began (and the kinds the later sections name). Checkpoints are Ed25519-signed (origin, size, head,
// time) in a strict text form. A *BreakError{Seq, Reason} names a broken
// seq and why: gap, order, prev_hash, hash, payload, columns, checkpoint,
// checkpoint_sig, truncated, signature, backdated; verification returns
// them all (*Breaks).
//
// IncidentVersion holds every element of s. 7 of the Règlement sur les
// incidents de confidentialité (RLRQ c., r. 3.1) and what a notice to
// the CAI adds (s. 3), plus who was consulted (art. 3.7);
// Detection.FirstVersion pre-fills an incident from an isolation violation or
// transfer-verification failure with the assessment pending.
//
// Notice drafts (audit/export.Draft; GET
// /compliance/v1/incidents/{id}/drafts/{cai|persons|client}; cloisonctl
// incident draft ID KIND [--tenant T]): French then English, to the CAI (s. 3),
// the persons concerned (s. 4) or a client tenant's incident contact
// (art. 18.3). The register PDF opens with a summary table; it cites P-39.1 or
// A-2.1 (cloisond --register-regime private|public).
package audit
