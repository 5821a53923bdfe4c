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
//   - VerifyDir needs nothing but trusted public keys: it checks the
//     manifest signature, that the directory holds exactly the listed
//     files with their sizes and digests, re-hashes the ledger range into an
//     unbroken chain from the manifest's prev hash to its head, and holds it
//     to the embedded checkpoint.
//
// audit/postgres.Store.Export drives it:
//
//	stream ledger rows (one snapshot) -> ledger.jsonl, ledger.csv
//	pick or sign a checkpoint inside the range
//	register -> register.csv, notices.csv, register.pdf
//	hash every file, Sign the manifest, write manifest.txt
//	append export.created (manifest SHA-256) to the ledger
package export
