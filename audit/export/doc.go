// Package export writes and checks Cloison's compliance exports: a ledger
// range as JSON Lines (each line a canonical JSON object embedding the exact
// stored payload bytes) and CSV, the Loi 25 incident register as CSV and as
// a bilingual PDF report (French first, English beside), and a manifest
// signed with Ed25519 that lists every file's size and SHA-256, the ledger
// range with the hashes around it, and a signed ledger checkpoint.
//
// Guarantees:
//
//   - CSV files start with a UTF-8 byte-order mark (spreadsheets keep the
//     accents) and every text cell is neutralised against formula injection
//     (SafeCell).
//   - ParseManifest is strict: what parses marshals back byte for byte (fuzzed),
//     so the signature covers the whole text.
//   - VerifyDir (VerifyDirTrusted with trusted state) needs nothing but
//     trusted public keys: it checks the manifest signature, that the
//     directory holds exactly the listed files with their sizes and
//     digests, re-hashes the ledger range into an unbroken chain from the
//     manifest's prev hash to its head, recomputes the Merkle root and
//     holds it to the embedded C2SP checkpoint note, which must be of the
//     export's last entry ("checkpoint none" is refused), and, given a
//     trusted note, that the export's tree extends it (ErrSmallerTree,
//     ErrFork otherwise).
//   - Everything the register shows is under a hash: register.jsonl holds
//     each version's exact canonical content, each notice's canonical
//     record (audit.NoticeRecord: recipient, method, sent and recorded
//     times, text) and each incident's opening, with its ledger seq.
//     VerifyRegisterJSONL recomputes every digest against the exported
//     ledger events, takes opened/recorded times and actors from those
//     events, recomputes retain_until from the content, and requires a
//     record for every register event of the range; register.csv and
//     notices.csv must be byte for byte what register.jsonl gives.
//   - register.pdf is what register.jsonl renders: RenderRegisterPDF is a
//     pure function of register.jsonl and the manifest (no clock, no
//     random identifier; the PDF's creation date is the manifest's), and
//     VerifyDir renders it again and compares bytes. register.jsonl's
//     first line, the register line, names the renderer (PDFRenderer:
//     this layout and the gopdf version; a verifier of another version
//     refuses rather than compares), the regime, and the register
//     settings in force at the export's end (their canonical content,
//     held to their register.settings_set event when it is in the range):
//     the header's organisation and NEQ come from the register's own
//     settings, never from a flag. When that event precedes the range, the
//     line carries it and its record proof in the export's tree.
//
// # Who can forge what
//
// The manifest is signed by the exporter's key (cloisonctl audit export
// --manifest-key, cloisond's export key): whoever exports holds it, so the
// operator can always re-sign a manifest after editing a file. Nothing the
// inspector reads may therefore rest on that signature alone. The chain is
// ledger.jsonl -> the embedded C2SP checkpoint, signed by the log's key
// (checked with --checkpoint-public-key, a key the exporter does not need
// and, with witnesses, cosigned by parties the operator does not
// control); register.jsonl -> the ledger events' digests; register.csv,
// notices.csv and register.pdf -> register.jsonl, byte for byte. An edited
// PDF (a risk turned to "non", a notice backdated) with a re-signed
// manifest is refused: it is not the rendering of the records the
// checkpoint vouches for. What the manifest's signer alone still states:
// the export's creation time (the PDF's "Generated" line) and the regime
// cited in the title. The settings are proven in the log either way (in
// the range, or by their event's inclusion proof); what an export starting
// after them cannot prove is that no later version preceded the range
// (a log proves inclusion, not absence): export from seq 1 for that. The checkpoint
// key must be one the verifier trusts for the log, never the manifest key
// given again: verify-export takes them separately for that reason.
//
// The PDF opens with a summary table of every incident (id, status, opened,
// occurred, persons, notices by recipient), then one entry per page onward.
// It cites the Règlement under the register's Regime: P-39.1, r. 3.1 for an
// enterprise (the default), A-2.1, r. 3.1 for a public body (cloisond
// --register-regime, audit/postgres Config.Regime).
//
// Every citation the register's labels and the drafts print comes from
// one table, audit.Citations (the Act's sections and the Regulation's
// items, each with its French and English form); the CAI draft numbers
// its elements by the Regulation's items of s. 3.
//
// Draft writes notice drafts from an incident's current version, French
// first then English, for a person to review and send (nothing is
// recorded): to the Commission d'accès à l'information (Règlement s. 3:
// organisation and NEQ, contact, information and its categories, type
// (Act s. 3.6), circumstances and cause, dates, number of persons and in
// Québec — "inconnu" when not known, never 0 —, risk with the sensitivity,
// possible malicious uses, consequences and their likelihood, notice to
// persons, measures taken and planned, authorities outside Québec), to the persons concerned
// (s. 4), and to a client tenant (art. 18.3), addressed to its incident
// contact. A client draft names only that tenant (the others are counted)
// and carries no ledger sequence numbers, so the tenant itself may read it.
// An element not yet in the register reads "[à compléter / to be
// completed]".
//
// Write drives an export from a Source, the reads it needs of a ledger
// store (audit/postgres.Store.Export gives its own), so the orchestration
// is tested here against a ledger held in memory:
//
//	Source.Snapshot, one snapshot: range end, tree root at that size,
//	    tree-prefix hashes (From > 1), the register up to the range end
//	    (refused when it disagrees with the ledger), the register settings
//	Source.TreeNote: sign and keep the tree note of size To (a store
//	    without a checkpoint key refuses in Snapshot)
//	Source.Scan, ledger rows up to To -> ledger.jsonl, ledger.csv
//	    (a scan that ends early is ErrInconsistent)
//	register -> register.jsonl, register.csv, notices.csv, register.pdf
//	    (RenderRegisterPDF of the same records and the manifest's fields)
//	hash every file, Sign the manifest, write manifest.txt
//	Source.Append: export.created (manifest SHA-256) to the ledger
//
// # Files
//
// ledger.jsonl (exact stored bytes), ledger.csv, register.jsonl (the
// register's hashed records, canonical JSON), register.csv, notices.csv (UTF-8
// BOM, formula-injection safe), register.pdf (French labels first, English
// beside, embedded Go fonts), and manifest.txt signed with Ed25519 (file
// SHA-256s and sizes, ledger range with the hashes around it, the C2SP tree
// note of the export's last entry). VerifyDir checks it offline (cloisonctl
// audit verify-export [--trusted FILE]): every register record against its
// ledger event, the CSVs against register.jsonl, the PDF against its
// rendering, the Merkle root against the note.
//
// A store refuses to export a register that disagrees with its ledger (a
// row deleted behind the triggers: audit/postgres ErrRegisterMismatch),
// rather than write a shorter register that would verify.
package export
