// Package prefill is the prefill role of a Cloison node, and the parts every
// node is built from. A prefill node computes prompt KV for decode nodes and
// pushes it over the verified transfer (engine/transfer); it serves no
// public API, writes no ledger, and links neither package api nor the
// policies: the smallest node, and the floor package node builds a decode
// or full node on (Model, Capacity, ModelFile, AttestUnsafe).
//
// Ordering duties it keeps:
//   - Its capacity attestation comes BEFORE anything is allocated (reject
//     before allocate starts here): a pool that cannot hold a whole
//     request of the served context refuses to start with
//     attest.ErrFailed, unless a faults build switched the attestation off
//     (AttestUnsafe), and then the node publishes it as failed.
//   - Open checks the cluster key against the one the decode nodes
//     recorded BEFORE the model loads; it never records one itself.
//   - One prefill at a time: the model's forward pass and the arena have
//     one driver, as the engine loop is on a decode node.
//   - Several models (Config.Models, Spec.Models: --model repeated): each
//     is attested BEFORE its pool is allocated, with its own pool, arena,
//     sender and published attestation; a request names its model by
//     digest (PrefillService), one the node does not serve is refused
//     (not_found) before anything is computed, and each transfer's
//     manifest binds the digest of the model that computed it. The set is
//     fixed at start: a prefill node loads nothing at run time.
//   - A tenant created after start gets its partition on its first
//     prefill; an unknown tenant is refused before any page is touched.
//
// The loop that drives it (cloisond --role prefill; platformtest's split
// platform the same on loopback):
//
//	p, err := prefill.Open(ctx, prefill.Spec{DB: db, ClusterKey: rec, Keys: ring, Model: mf, Capacity: c, Listener: ln, ServerTLS: s, ClientTLS: cl})
//	if err != nil {
//	        return err // attest.ErrFailed, *KeyError
//	}
//	go p.Serve()
//	// on shutdown: p.Shutdown(ctx): in-flight prefills finish, then the model closes
package prefill
