package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/witness"
)

// logVerifyOptions say what `audit verify --server` checks and trusts. It
// is a struct so that more checks (witness cosignatures) join as fields.
type logVerifyOptions struct {
	Server      string // base URL of a cloisond (http://host:port)
	Token       string // bearer token: compliance:read + admin for the global log, compliance:read for a tenant log
	VerifierKey string // the published note verifier key, obtained out of band
	// Tenant, when set, verifies that tenant's own log (the token's
	// tenant; another tenant needs admin) instead of the global log.
	Tenant cloison.TenantID
	// Trusted is the file holding the last checkpoint verified: a newer
	// one must come with a consistency proof from it, and replaces it only
	// once every check passed. Empty: no trusted state (first contact
	// every time). A missing file is created (trust on first use).
	Trusted string
	// Entries are the entries (ledger seq, or positions in the tenant log)
	// whose inclusion is checked; none: every entry of the checkpoint's
	// tree, listed and hashed to its root (checkAll).
	Entries []uint64
	// Witnesses > 0 requires that many witnesses, global log only. With
	// WitnessURLs (URL=VKEY) each is asked for the latest checkpoint of
	// the log it cosigned (audit/witness VerifyWitnessed) and the head must
	// be consistent with every answer: the operator cannot show this
	// verifier a tree the witnesses refused, whatever its database says.
	// With WitnessKeys alone, the server's latest checkpoint carrying that
	// many cosignatures (checkpoint?witnesses=K) is checked
	// (audit.VerifyCosigned), each cosignature no older than MaxAge, and
	// the head must extend it.
	Witnesses   int
	WitnessKeys []string
	WitnessURLs []string
	MaxAge      time.Duration
	Client      *http.Client // nil: a client with a 30 s timeout
}

// logReport is what a verification established.
type logReport struct {
	Head        audit.TreeHead
	TrustedSize uint64 // size of the trusted checkpoint it was proved to extend (0: none)
	FirstUse    bool   // the trusted file did not exist and was created
	Included    []uint64
	All         uint64 // every entry up to this size was listed and hashes to the checkpoint's root (no Entries asked)
	Cosigned    uint64 // size of the cosigned checkpoint the head extends (Witnesses > 0)
}

func (r logReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %s size %d root %s: signature verified\n", r.Head.Origin, r.Head.Size, base64.StdEncoding.EncodeToString(r.Head.Root[:]))
	switch {
	case r.FirstUse:
		fmt.Fprintf(&b, "trusted state created (first use): later runs demand a consistency proof from size %d\n", r.Head.Size)
	case r.TrustedSize > 0:
		fmt.Fprintf(&b, "consistent with the trusted checkpoint of size %d\n", r.TrustedSize)
	}
	for _, e := range r.Included {
		fmt.Fprintf(&b, "entry %d included\n", e)
	}
	if r.All > 0 {
		fmt.Fprintf(&b, "all %d entries listed: they hash to the checkpoint's root\n", r.All)
	}
	return b.String()
}

// verifyLog fetches the latest checkpoint from the server, checks its
// signature with the verifier key, a consistency proof from the trusted
// checkpoint and inclusion proofs of the entries, and then stores the new
// checkpoint as trusted. Every refusal is an error with a named reason:
// audit.ErrNoCheckpoint, audit.ErrEmptyLedger, audit.ErrSmallerTree,
// audit.ErrFork, audit.ErrNotIncluded, audit.ErrBadSignature,
// audit.ErrMalformed; a server error otherwise.
func verifyLog(ctx context.Context, o logVerifyOptions) (logReport, error) {
	var rep logReport
	if o.Server == "" || o.VerifierKey == "" {
		return rep, cloison.NewError(cloison.CodeInvalid, "audit verify --server needs --verifier-key (the published key, obtained out of band)")
	}
	c := &logClient{base: strings.TrimRight(o.Server, "/"), token: o.Token, http: o.Client}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	prefix := "/compliance/v1/tlog"
	open := func(msg []byte) (audit.TreeHead, error) { return audit.OpenTreeHead(msg, o.VerifierKey) }
	if o.Tenant != "" {
		prefix += "/tenant"
		open = func(msg []byte) (audit.TreeHead, error) { return audit.OpenTenantHead(msg, o.VerifierKey, o.Tenant) }
	}
	tq := url.Values{}
	if o.Tenant != "" {
		tq.Set("tenant", string(o.Tenant))
	}
	msg, err := c.get(ctx, prefix+"/checkpoint", tq)
	if err != nil {
		return rep, err
	}
	head, err := open(msg)
	if err != nil {
		return rep, err
	}
	rep.Head = head

	if o.Witnesses > 0 {
		if o.Tenant != "" {
			return rep, cloison.NewError(cloison.CodeInvalid, "--witnesses checks the global log, not a tenant log")
		}
		check := c.checkCosigned
		if len(o.WitnessURLs) > 0 {
			check = c.checkAsked
		}
		if rep.Cosigned, err = check(ctx, o, prefix, msg, head); err != nil {
			return rep, err
		}
	}
	if rep.TrustedSize, rep.FirstUse, err = c.checkTrusted(ctx, o, prefix, tq, msg, head, open); err != nil {
		return rep, err
	}
	if len(o.Entries) == 0 {
		if rep.All, err = c.checkAll(ctx, tq, head); err != nil {
			return rep, err
		}
	} else if rep.Included, err = c.checkIncluded(ctx, o, prefix, tq, msg, head); err != nil {
		return rep, err
	}
	if o.Trusted != "" {
		if err := writeTrusted(o.Trusted, msg); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// checkCosigned checks that a checkpoint with o.Witnesses cosignatures of
// o.WitnessKeys exists and that head's tree extends it; it returns that
// checkpoint's size.
func (c *logClient) checkCosigned(ctx context.Context, o logVerifyOptions, prefix string, msg []byte, head audit.TreeHead) (uint64, error) {
	if o.Tenant != "" {
		return 0, cloison.NewError(cloison.CodeInvalid, "--witnesses checks the global log, not a tenant log")
	}
	q := url.Values{"witnesses": {strconv.Itoa(o.Witnesses)}}
	cp, err := c.get(ctx, prefix+"/checkpoint", q)
	if err != nil {
		return 0, fmt.Errorf("no checkpoint with %d cosignatures: %w", o.Witnesses, err)
	}
	ch, cs, err := audit.VerifyCosigned(cp, o.VerifierKey, o.WitnessKeys, o.Witnesses)
	if err != nil {
		return 0, err
	}
	if err := (&witnessVerify{maxAge: o.MaxAge}).fresh(cs, time.Now()); err != nil {
		return 0, err
	}
	proof, err := c.consistency(ctx, prefix, url.Values{}, ch.Size, head.Size)
	if err != nil {
		return 0, err
	}
	if _, err := audit.VerifyConsistency(o.VerifierKey, cp, msg, proof); err != nil {
		return 0, err
	}
	return ch.Size, nil
}

// checkAsked asks each o.WitnessURLs witness for its latest cosigned
// checkpoint and requires head to be consistent with every answer, k of
// them at least; it returns the largest size a witness cosigned.
func (c *logClient) checkAsked(ctx context.Context, o logVerifyOptions, prefix string, _ []byte, head audit.TreeHead) (uint64, error) {
	clients, err := (&witnessVerify{specs: o.WitnessURLs}).clients()
	if err != nil {
		return 0, err
	}
	proof := func(ctx context.Context, old, size uint64) (tlog.TreeProof, error) {
		return c.consistency(ctx, prefix, url.Values{}, old, size)
	}
	obs, err := witness.VerifyWitnessed(ctx, clients, o.VerifierKey, head, proof, o.Witnesses)
	if err != nil {
		return 0, err
	}
	var most uint64
	for _, w := range obs {
		most = max(most, w.Head.Size)
	}
	return most, nil
}

// checkTrusted checks that head's tree extends the one in o.Trusted (none
// yet: first use); it returns the trusted tree's size.
func (c *logClient) checkTrusted(ctx context.Context, o logVerifyOptions, prefix string, tq url.Values, msg []byte, head audit.TreeHead,
	open func([]byte) (audit.TreeHead, error)) (size uint64, firstUse bool, err error) {
	if o.Trusted == "" {
		return 0, false, nil
	}
	trusted, err := os.ReadFile(o.Trusted)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, true, nil
	case err != nil:
		return 0, false, fmt.Errorf("trusted state: %w", err)
	}
	old, err := open(trusted)
	if err != nil {
		return 0, false, fmt.Errorf("trusted state %s: %w", o.Trusted, err)
	}
	proof, err := c.consistency(ctx, prefix, tq, old.Size, head.Size)
	if err != nil {
		return 0, false, err
	}
	if o.Tenant != "" {
		_, err = audit.VerifyTenantConsistency(o.VerifierKey, o.Tenant, trusted, msg, proof)
	} else {
		_, err = audit.VerifyConsistency(o.VerifierKey, trusted, msg, proof)
	}
	if err != nil {
		return 0, false, err
	}
	return old.Size, false, nil
}

// listPage is how many rows checkAll asks for at a time (well under the
// 16 MiB an answer may hold).
const listPage = 5000

// checkAll lists every entry of head's tree (the global ledger, or the
// tenant log tq names) in pages, and recomputes the tree's root from the
// listed rows: an entry deleted, added or altered anywhere, not only at
// the end, fails (audit.ErrNotIncluded, or audit.ErrMalformed for a
// listing with a gap). It returns head's size.
func (c *logClient) checkAll(ctx context.Context, tq url.Values, head audit.TreeHead) (uint64, error) {
	m := &audit.MemTree{}
	for from := uint64(1); from <= head.Size; from += listPage {
		to := min(from+listPage-1, head.Size)
		q := cloneValues(tq)
		q.Set("from", strconv.FormatUint(from, 10))
		q.Set("to", strconv.FormatUint(to, 10))
		body, err := c.get(ctx, "/compliance/v1/ledger", q)
		if err != nil {
			return 0, err
		}
		rows, err := decodeListing(body, from)
		if err != nil { // a gap: an entry the checkpoint signs is not listed
			return 0, fmt.Errorf("%w: %w", audit.ErrNotIncluded, err)
		}
		if uint64(len(rows)) != to-from+1 {
			return 0, fmt.Errorf("%w: listing: %d rows for entries %d..%d of a tree of size %d", audit.ErrNotIncluded, len(rows), from, to, head.Size)
		}
		for _, r := range rows {
			if _, err := m.Append(r.Leaf); err != nil {
				return 0, err
			}
		}
	}
	h, err := m.Head(head.Origin, m.Size())
	if err != nil {
		return 0, err
	}
	if h.Root != head.Root {
		return 0, fmt.Errorf("%w: the listed entries are not the tree the checkpoint signs", audit.ErrNotIncluded)
	}
	return head.Size, nil
}

// checkIncluded checks the inclusion of o.Entries in head's tree; it
// returns those included, up to the first that is not.
func (c *logClient) checkIncluded(ctx context.Context, o logVerifyOptions, prefix string, tq url.Values, msg []byte, head audit.TreeHead) ([]uint64, error) {
	entries := o.Entries
	var included []uint64
	for _, e := range entries {
		q := cloneValues(tq)
		q.Set("seq", strconv.FormatUint(e, 10))
		q.Set("tree_size", strconv.FormatUint(head.Size, 10))
		var ij struct {
			Payload json.RawMessage `json:"payload"`
			Proof   []string        `json:"proof"`
		}
		if e == 0 || e > head.Size {
			return included, fmt.Errorf("%w: entry %d is outside a tree of size %d", audit.ErrNotIncluded, e, head.Size)
		}
		if err := c.getJSON(ctx, prefix+"/inclusion", q, &ij); err != nil {
			return included, err
		}
		proof, err := decodeHashes(ij.Proof)
		if err != nil {
			return included, err
		}
		if o.Tenant != "" {
			_, err = audit.VerifyTenantInclusion(msg, o.VerifierKey, o.Tenant, e, ij.Payload, proof)
		} else {
			_, err = audit.VerifyInclusion(msg, o.VerifierKey, audit.Record{Seq: e, Payload: ij.Payload}, proof)
		}
		if err != nil {
			return included, err
		}
		included = append(included, e)
	}
	return included, nil
}

// decodeListing reads a ledger listing's rows (JSON lines), which must be
// the positions from on without a gap; it returns those read up to the
// first that is not.
func decodeListing(body []byte, from uint64) ([]listedLeaf, error) {
	var rows []listedLeaf
	dec := json.NewDecoder(bytes.NewReader(body))
	for dec.More() {
		var row struct {
			Seq     uint64          `json:"seq"`
			Kind    string          `json:"kind"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := dec.Decode(&row); err != nil {
			return rows, fmt.Errorf("%w: listing: %v", audit.ErrMalformed, err)
		}
		if want := from + uint64(len(rows)); row.Seq != want {
			return rows, fmt.Errorf("%w: listing: row %d where position %d was due", audit.ErrMalformed, row.Seq, want)
		}
		rows = append(rows, listedLeaf{Pos: row.Seq, Kind: row.Kind, Leaf: row.Payload})
	}
	return rows, nil
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func decodeHashes(in []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(in))
	for i, s := range in {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(b) != tlog.HashSize {
			return nil, fmt.Errorf("%w: proof hash %d", audit.ErrMalformed, i)
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// writeTrusted replaces the trusted state durably: temporary file, fsync,
// rename.
func writeTrusted(path string, msg []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".trusted-*")
	if err != nil {
		return fmt.Errorf("trusted state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(msg); err != nil {
		tmp.Close()
		return fmt.Errorf("trusted state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("trusted state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("trusted state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("trusted state: %w", err)
	}
	return nil
}

// logClient reads the server's tlog routes.
type logClient struct {
	base, token string
	http        *http.Client
}

// knownRefusals are the named errors a server reports that verification
// names in turn (matched by their public message, which is all the wire
// carries).
var knownRefusals = []error{audit.ErrNoCheckpoint, audit.ErrEmptyLedger}

func (c *logClient) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, cloison.NewError(cloison.CodeInvalid, "bad --server URL").Withf("%v", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, cloison.NewError(cloison.CodeUnavailable, "server unreachable").Withf("%v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, cloison.NewError(cloison.CodeUnavailable, "server answer cut").Withf("%v", err)
	}
	if resp.StatusCode != 200 {
		var eb api.ErrorBody
		_ = json.Unmarshal(b, &eb)
		for _, k := range knownRefusals {
			if eb.Error.Message == cloison.PublicMessage(k) {
				return nil, fmt.Errorf("server: %w", k)
			}
		}
		code := cloison.Code(eb.Error.Code)
		if code == "" {
			code = cloison.CodeUnavailable
		}
		return nil, cloison.Errorf(code, "server: %s %s: %d %s", req.Method, path, resp.StatusCode, eb.Error.Message)
	}
	return b, nil
}

func (c *logClient) getJSON(ctx context.Context, path string, q url.Values, v any) error {
	b, err := c.get(ctx, path, q)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", audit.ErrMalformed, path, err)
	}
	return nil
}

// readVerifierKey returns the key in the file v names, or v itself when no
// such file exists (a key is "<name>+<hash>+<base64>").
func readVerifierKey(v string) (string, error) {
	b, err := os.ReadFile(v)
	if errors.Is(err, os.ErrNotExist) || v == "" {
		return v, nil
	}
	if err != nil {
		return "", fmt.Errorf("verifier key: %w", err)
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]), nil
}

// consistency fetches the consistency proof from old to size (none when old
// is not smaller: the verifier then compares the two heads themselves).
func (c *logClient) consistency(ctx context.Context, prefix string, tq url.Values, old, size uint64) (tlog.TreeProof, error) {
	if old >= size {
		return nil, nil
	}
	q := cloneValues(tq)
	q.Set("old_size", strconv.FormatUint(old, 10))
	q.Set("new_size", strconv.FormatUint(size, 10))
	var cj struct {
		Proof []string `json:"proof"`
	}
	if err := c.getJSON(ctx, prefix+"/consistency", q, &cj); err != nil {
		return nil, err
	}
	return decodeHashes(cj.Proof)
}

// tenantListOptions say which rows of a tenant log `audit log` lists.
type tenantListOptions struct {
	Server, Token, VerifierKey string
	Tenant                     cloison.TenantID
	From, To                   uint64       // positions; To 0: the checkpoint's size
	Client                     *http.Client // nil: a client with a 30 s timeout
}

// listedLeaf is one row of a tenant's listing, checked.
type listedLeaf struct {
	Pos  uint64
	Kind string
	Leaf []byte // the leaf's exact bytes, as hashed
}

// tenantListing is what listTenantLog established.
type tenantListing struct {
	Head   audit.TreeHead
	Rows   []listedLeaf
	Proofs int // inclusion proofs fetched; 0 when the whole tree was recomputed
}

func (l tenantListing) String() string {
	var b strings.Builder
	for _, r := range l.Rows {
		what := ""
		if v, ok := audit.DecodeTenantView(r.Leaf); ok {
			what = fmt.Sprintf(" (redacted: %d other tenants)", v.OtherTenants)
		}
		fmt.Fprintf(&b, "%d\t%s%s\t%s\n", r.Pos, r.Kind, what, r.Leaf)
	}
	how := "the tree recomputed from them matches its root"
	if l.Proofs > 0 {
		how = fmt.Sprintf("%d inclusion proofs verified", l.Proofs)
	}
	if len(l.Rows) == 0 {
		how = "no rows"
	}
	fmt.Fprintf(&b, "tenant log %s size %d: signature verified; %d rows listed, %s\n", l.Head.Origin, l.Head.Size, len(l.Rows), how)
	return b.String()
}

// listTenantLog fetches tenant o.Tenant's signed checkpoint and its ledger
// listing (GET /compliance/v1/ledger?tenant=T: row N is position N of the
// log, its payload the leaf as hashed) for positions From..To within the
// checkpoint, and checks every row against the checkpoint: the whole log
// by recomputing the tree from the rows (no further request), a part by
// one inclusion proof per row. A row missing, out of order or not the
// checkpoint's leaf fails.
//
// Errors: as verifyLog (audit.ErrNotIncluded for a row the checkpoint does
// not hold, audit.ErrMalformed for rows that do not parse or are not the
// positions asked for).
func listTenantLog(ctx context.Context, o tenantListOptions) (tenantListing, error) {
	var l tenantListing
	if o.Server == "" || o.VerifierKey == "" || o.Tenant == "" {
		return l, cloison.NewError(cloison.CodeInvalid, "audit log needs --server, --tenant and --verifier-key (the published key, obtained out of band)")
	}
	c := &logClient{base: strings.TrimRight(o.Server, "/"), token: o.Token, http: o.Client}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	tq := url.Values{"tenant": {string(o.Tenant)}}
	cp, err := c.get(ctx, "/compliance/v1/tlog/tenant/checkpoint", tq)
	if err != nil {
		return l, err
	}
	if l.Head, err = audit.OpenTenantHead(cp, o.VerifierKey, o.Tenant); err != nil {
		return l, err
	}
	from, to := max(o.From, 1), o.To
	if to == 0 || to > l.Head.Size {
		to = l.Head.Size
	}
	if from > to {
		return l, nil
	}
	q := cloneValues(tq)
	q.Set("from", strconv.FormatUint(from, 10))
	q.Set("to", strconv.FormatUint(to, 10))
	body, err := c.get(ctx, "/compliance/v1/ledger", q)
	if err != nil {
		return l, err
	}
	if l.Rows, err = decodeListing(body, from); err != nil {
		return l, err
	}
	if uint64(len(l.Rows)) != to-from+1 {
		return l, fmt.Errorf("%w: listing: %d rows for positions %d..%d of a log of size %d", audit.ErrNotIncluded, len(l.Rows), from, to, l.Head.Size)
	}
	if from == 1 && to == l.Head.Size {
		m := &audit.MemTree{}
		for _, r := range l.Rows {
			if _, err := m.Append(r.Leaf); err != nil {
				return l, err
			}
		}
		h, err := m.Head(l.Head.Origin, m.Size())
		if err != nil {
			return l, err
		}
		if h.Root != l.Head.Root {
			return l, fmt.Errorf("%w: the listed rows are not the tenant log the checkpoint signs", audit.ErrNotIncluded)
		}
		return l, nil
	}
	for _, r := range l.Rows {
		iq := cloneValues(tq)
		iq.Set("seq", strconv.FormatUint(r.Pos, 10))
		iq.Set("tree_size", strconv.FormatUint(l.Head.Size, 10))
		var ij struct {
			Proof []string `json:"proof"`
		}
		if err := c.getJSON(ctx, "/compliance/v1/tlog/tenant/inclusion", iq, &ij); err != nil {
			return l, err
		}
		proof, err := decodeHashes(ij.Proof)
		if err != nil {
			return l, err
		}
		// The row's own bytes against the proof: not the proof's payload.
		if _, err := audit.VerifyTenantInclusion(cp, o.VerifierKey, o.Tenant, r.Pos, r.Leaf, proof); err != nil {
			return l, fmt.Errorf("position %d: %w", r.Pos, err)
		}
		l.Proofs++
	}
	return l, nil
}
