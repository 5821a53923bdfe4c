package export

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cloison/cloison/audit"
)

// bom makes spreadsheet programs read the file as UTF-8 (accents intact).
const bom = "\uFEFF"

// CSV writes UTF-8 CSV with a byte-order mark. Text cells are neutralised
// against formula injection (CWE-1236): a cell that a spreadsheet would
// evaluate — starting with =, +, -, @, tab or carriage return — is prefixed
// with a single quote, so it shows as text and never runs.
type CSV struct {
	w *csv.Writer
}

// NewCSV writes the BOM and returns a CSV writer.
func NewCSV(w io.Writer) (*CSV, error) {
	if _, err := io.WriteString(w, bom); err != nil {
		return nil, err
	}
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	return &CSV{w: cw}, nil
}

// SafeCell neutralises a text cell against formula injection.
func SafeCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r', '\n':
		return "'" + s
	}
	// Full-width variants that some spreadsheets also treat as formulas.
	for _, p := range []string{"＝", "＋", "－", "＠"} {
		if strings.HasPrefix(s, p) {
			return "'" + s
		}
	}
	return s
}

// Row writes text cells, each neutralised.
func (c *CSV) Row(cells ...string) error {
	out := make([]string, len(cells))
	for i, s := range cells {
		out[i] = SafeCell(s)
	}
	return c.w.Write(out)
}

// Flush flushes and reports any write error.
func (c *CSV) Flush() error {
	c.w.Flush()
	return c.w.Error()
}

// LedgerCSVHeader labels the ledger CSV columns, French first.
var LedgerCSVHeader = []string{
	"séquence / seq", "enregistré le / recorded_at", "survenu le / occurred_at", "type / kind",
	"locataire / tenant", "acteur / actor", "empreinte / hash", "empreinte précédente / prev_hash", "contenu / payload",
}

// LedgerCSVRow returns one ledger record's cells.
func LedgerCSVRow(r audit.Record) []string {
	return []string{
		strconv.FormatUint(r.Seq, 10), r.RecordedAt.UTC().Format(time.RFC3339Nano), r.OccurredAt.UTC().Format(time.RFC3339Nano),
		string(r.Kind), string(r.Tenant), string(r.Actor), r.Hash.String(), r.PrevHash.String(), string(r.Payload),
	}
}

// WriteRegisterCSV writes one row per incident version, every element of
// the register in its own column.
func WriteRegisterCSV(w io.Writer, files []audit.IncidentFile) error {
	c, err := NewCSV(w)
	if err != nil {
		return err
	}
	hdr := []string{"incident / incident", "version / version", "enregistrée le / recorded_at", "par / by", "séquence du registre / ledger seq",
		"empreinte / sha256", "conserver jusqu'au / retain until"}
	for _, f := range registerFields(audit.StoredVersion{}, nil, time.Time{}) {
		hdr = append(hdr, f.fr+" / "+f.en)
	}
	if err := c.Row(hdr...); err != nil {
		return err
	}
	for _, f := range files {
		for _, v := range f.Versions {
			row := []string{string(f.ID), strconv.FormatInt(v.Version, 10), v.RecordedAt.UTC().Format(time.RFC3339), string(v.RecordedBy),
				strconv.FormatUint(v.LedgerSeq, 10), v.Digest.String(), string(v.RetainUntil)}
			for _, fl := range registerFields(v, f.Notices, f.OpenedAt) {
				row = append(row, fl.value)
			}
			if err := c.Row(row...); err != nil {
				return err
			}
		}
	}
	return c.Flush()
}

// WriteNoticesCSV writes one row per notice.
func WriteNoticesCSV(w io.Writer, files []audit.IncidentFile) error {
	c, err := NewCSV(w)
	if err != nil {
		return err
	}
	if err := c.Row("incident / incident", "avis / notice", "destinataire (type) / recipient kind", "destinataire / recipient",
		"locataire / tenant", "envoyé le / sent at", "moyen / method", "empreinte de l'avis / notice sha256",
		"enregistré le / recorded at", "par / by", "séquence du registre / ledger seq"); err != nil {
		return err
	}
	for _, f := range files {
		for _, n := range f.Notices {
			if err := c.Row(string(f.ID), strconv.FormatInt(n.Number, 10), recipientLabel(n.Recipient), n.RecipientName, string(n.Tenant),
				n.SentAt.UTC().Format(time.RFC3339), n.Method, n.ContentDigest.String(), n.RecordedAt.UTC().Format(time.RFC3339),
				string(n.RecordedBy), strconv.FormatUint(n.LedgerSeq, 10)); err != nil {
				return err
			}
		}
	}
	return c.Flush()
}
