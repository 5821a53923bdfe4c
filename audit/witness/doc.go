// Package witness is a C2SP tlog-witness for Cloison's ledger (and any log
// whose checkpoints are C2SP tlog-checkpoint notes with Ed25519 keys), and
// the log side of the protocol: a client that submits checkpoints and a
// submitter that runs beside the ledger.
//
// What a witness proves. A witness holds its own Ed25519 key and, per log,
// the latest checkpoint it cosigned (state file, replaced atomically before
// any answer). It cosigns a checkpoint (C2SP tlog-cosignature,
// cosignature/v1: a timestamped signature line) only when the log's key
// signed it and a consistency proof from the size it last cosigned shows
// the new tree extends that one. Its cosignature therefore says "at this
// time, this was the largest tree of this log I had seen, and every tree I
// cosigned before is a prefix of it". Holding it, a verifier knows the
// operator cannot later show a tree that does not extend it — a database
// restored from an older dump, a truncated tail, or a rollback followed by
// new entries (a fork) — without the witness refusing: a truncated or
// rolled-back log gets 409 with a size larger than its own
// (ReasonSmaller, audit.ErrSmallerTree), a fork gets 422 or a 409 at its
// own size (ReasonFork, audit.ErrFork). A witness proves nothing about the
// entries' content (the log's key and the hash chain do that), and one
// witness run by the operator is in the operator's trust domain: require k
// cosignatures from independent witnesses (audit.VerifyCosigned) to make a
// split view need k colluding witnesses. A witness that loses its state
// must be given a new key, never restarted empty with the old one.
//
// Protocol (Witness.ServeHTTP, C2SP tlog-witness):
//
//	POST /add-checkpoint
//	old <size>\n <≤63 base64 proof lines>\n \n <signed checkpoint>
//	200 "— <witness> base64(key hash ‖ timestamp ‖ sig)\n"
//	400 malformed; 403 no trusted signature; 404 unknown origin;
//	409 text/x.tlog.size "<cosigned size>\n" (old size is not it, or
//	    another root at that size); 422 the proof does not verify.
//
//	GET /cosigned-checkpoint?origin=O      (an extension, not in C2SP)
//	200 the log's checkpoint it cosigned last, with the log's signature
//	    and a cosignature made now; 404 unknown origin or nothing cosigned
//
// Asked, not remembered. Cosignatures the log stores (tlog_cosignatures)
// live in the database whose rollback they should reveal: after a restore
// from a dump and new entries, the dump's own cosignatures still verify
// and the fork extends them. A verifier that keeps no state therefore
// asks each witness what it cosigned last (Client.Latest; the witness
// keeps the signed checkpoint in its state file) and requires the log's
// tree to be consistent with every answer (VerifyWitnessed: a witness
// behind the head gets a consistency proof to the head, one ahead a proof
// from the head to its size); one witness the log contradicts is a
// *ContradictedError (audit.ErrFork or audit.ErrSmallerTree), whatever k
// is. Combine merges k answers at one size into the note
// audit.VerifyCosigned checks, so cloisond's checkpoint?witnesses=K asks
// too. cloisond also asks every witness at start and hands the answers to
// the ledger, which never signs a tree that does not extend them
// (audit/postgres Config.TrustedTrees).
//
// The log side (cloisond): every interval, the Submitter reads the latest
// stored tree checkpoint, and for each witness that has not cosigned it:
//
//	proof := ConsistencyProof(witness size, size)  // size from the DB, then learned
//	POST add-checkpoint                            // 409: resubmit from the size it names
//	check the cosignature with the witness's key   // BEFORE storing it
//	StoreCosignature(size, witness, line)          // tlog_cosignatures
//
// It never runs on the append path: a witness that is down or refuses is
// logged and counted (Stats) and tried again with the next checkpoint.
//
// # Commands
//
//	cloisonctl witness --key K --state S --name N --log TREE_VKEY [--addr]
//	cloisonctl witness vkey --create                      # the witness's own Ed25519 key
//
// A witness answers 409 with its size, 422 for a bad proof, 404/403 as the spec
// says. cloisond --witness URL=VKEY (repeatable) submits each new tree
// checkpoint (it logs its tree_vkey at start) and keeps the cosignatures in
// tlog_cosignatures; an unreachable witness is logged and counted
// (cloison_witness_failures_total) and never blocks appends; a refusal is
// logged with its reason (smaller_tree, fork) and counted
// (cloison_witness_refusals_total, alert CloisonWitnessRefused).
//
//	cloisonctl audit verify --witness URL=VKEY --witnesses K     # asks K witnesses (database or --server)
//	cloisonctl audit verify --witness-key VKEY --witnesses K --max-cosignature-age 10m
//
// The second reads the log's stored cosignatures and refuses any older
// than the bound; --witnesses K with neither is refused.
package witness
