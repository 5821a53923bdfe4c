package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cloison/cloison/audit"
)

// AppendLedgerLine appends one JSON Lines record for r: a canonical JSON
// object whose "event" member is the exact stored payload bytes, so the
// hash can be recomputed from the export alone.
func AppendLedgerLine(b []byte, r audit.Record) []byte {
	b = append(b, `{"event":`...)
	b = append(b, r.Payload...)
	b = append(b, `,"hash":"`...)
	b = append(b, r.Hash.String()...)
	b = append(b, `","prev_hash":"`...)
	b = append(b, r.PrevHash.String()...)
	b = append(b, `","recorded_at":"`...)
	b = append(b, r.RecordedAt.UTC().Format(audit.TimeFormat)...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	return append(b, "}\n"...)
}

type ledgerLine struct {
	Event      json.RawMessage `json:"event"`
	Hash       audit.Digest    `json:"hash"`
	PrevHash   audit.Digest    `json:"prev_hash"`
	RecordedAt string          `json:"recorded_at"`
	Seq        uint64          `json:"seq"`
}

// ReadLedgerJSONL streams records from r to fn. Each line must be exactly
// what AppendLedgerLine writes (so a line is its own canonical form).
func ReadLedgerJSONL(r io.Reader, fn func(audit.Record) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		var l ledgerLine
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return fmt.Errorf("%w: ledger line %d: %v", ErrVerify, n, err)
		}
		t, err := time.Parse(audit.TimeFormat, l.RecordedAt)
		if err != nil {
			return fmt.Errorf("%w: ledger line %d: recorded_at: %v", ErrVerify, n, err)
		}
		rec := audit.Record{Seq: l.Seq, Hash: l.Hash, PrevHash: l.PrevHash, RecordedAt: t, Payload: []byte(l.Event)}
		if !bytes.Equal(AppendLedgerLine(nil, rec), append(line, '\n')) {
			return fmt.Errorf("%w: ledger line %d is not in its exact exported form", ErrVerify, n)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return sc.Err()
}
