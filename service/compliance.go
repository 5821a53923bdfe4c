package service

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/tenancy"
)

// Errors of the compliance operations.
var (
	// ErrNotVisible hides incidents and ledger rows of other tenants: the
	// caller sees "not found", never that they exist.
	ErrNotVisible = cloison.NewError(cloison.CodeNotFound, "incident not found")
	// ErrNoExportKey: this node has no key to sign export manifests.
	ErrNoExportKey = cloison.NewError(cloison.CodeUnavailable, "this node has no export signing key")
)

// RegisterStore is the Loi 25 incident register (*postgres.Store): every
// write is ledgered in its own transaction.
type RegisterStore interface {
	OpenIncident(ctx context.Context, actor audit.Name, v audit.IncidentVersion) (audit.StoredVersion, error)
	UpdateIncident(ctx context.Context, actor audit.Name, id audit.Name, fn func(*audit.IncidentVersion) error) (audit.StoredVersion, error)
	AddNotice(ctx context.Context, actor audit.Name, n audit.Notice) (audit.StoredNotice, error)
	Incident(ctx context.Context, id audit.Name) (audit.IncidentFile, error)
	Incidents(ctx context.Context) ([]audit.IncidentFile, error)
	RegisterSettings(ctx context.Context) (audit.RegisterSettings, error)
	SetRegisterSettings(ctx context.Context, actor audit.Name, org audit.Organization, contact audit.Contact) (audit.RegisterSettings, error)
	// CheckRegister holds the whole register to the ledger and returns
	// every disagreement (audit.ErrChainBroken each): a row deleted
	// behind the triggers is one. err is the store's own failure.
	CheckRegister(ctx context.Context) (problems []error, err error)
}

// LedgerReader is the ledger read, verified and exported (*postgres.Store).
type LedgerReader interface {
	Scan(ctx context.Context, from, to uint64, fn func(audit.Record) error) error
	Verify(ctx context.Context, opts audit.VerifyOptions) (audit.Result, error)
	Export(ctx context.Context, opts export.Options) (export.Manifest, error)
	TenantEntries(ctx context.Context, t cloison.TenantID, from, to uint64, fn func(audit.TenantLogEntry) error) error
}

// ComplianceDeps is what the compliance operations are made of. Gate,
// Now, Verify and ExportKey are optional.
type ComplianceDeps struct {
	Register RegisterStore
	Ledger   LedgerReader
	Tenants  TenantStore
	// Log is the transparency log the proofs come from (proofs.go).
	Log TransparencyLog
	// Witnesses (optional) are asked for cosigned checkpoints instead of
	// the cosignatures the log stored (proofs.go).
	Witnesses Witnesses
	// Gate bounds the compliance streams (ledger ranges, exports,
	// verifications); nil admits every one.
	Gate Gate
	// Now is the clock the notice deadlines are read against (nil:
	// time.Now).
	Now func() time.Time
	// Verify says which checkpoint keys and external directory a
	// verification of the ledger trusts.
	Verify audit.VerifyOptions
	// ExportKey signs the manifests of exports; without it Export is
	// refused.
	ExportKey ed25519.PrivateKey
}

// Compliance is the privacy officers' view of the incident register and
// the ledger. Reads are scoped to the caller's tenant unless the caller is
// an operator officer (Operator); a tenant's view is redacted: an incident
// it shares with other tenants shows them counted, not named, and only the
// notices sent to the tenant itself (audit.IncidentFile.ForTenant); its
// ledger listing is its tenant log, never the global one. Writes to the
// register are ledgered by the register in the write's transaction.
type Compliance struct{ d ComplianceDeps }

// NewCompliance returns the compliance operations over d.
func NewCompliance(d ComplianceDeps) *Compliance {
	if d.Gate == nil {
		d.Gate = openGate{}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Compliance{d: d}
}

// visible reports whether the caller may see an incident.
func visible(p tenancy.Principal, f audit.IncidentFile) bool {
	if Operator(p) {
		return true
	}
	for _, v := range f.Versions {
		if slices.Contains(v.AffectedTenants, p.Tenant) {
			return true
		}
	}
	return false
}

// Incidents returns the register entries p may see (never nil).
// Errors: the register's.
func (c *Compliance) Incidents(ctx context.Context, p tenancy.Principal) ([]audit.IncidentFile, error) {
	all, err := c.d.Register.Incidents(ctx)
	if err != nil {
		return nil, err
	}
	out := []audit.IncidentFile{}
	for _, f := range all {
		if visible(p, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Incident returns one register entry. Errors: ErrNotVisible when it does
// not exist or p may not see it (the two are indistinguishable); the
// register's.
func (c *Compliance) Incident(ctx context.Context, p tenancy.Principal, id audit.Name) (audit.IncidentFile, error) {
	f, err := c.d.Register.Incident(ctx, id)
	if errors.Is(err, audit.ErrNotFound) || (err == nil && !visible(p, f)) {
		return audit.IncidentFile{}, ErrNotVisible
	}
	return f, err
}

// OpenIncident appends version 1 of a register entry (a new id unless v
// names one; source admin unless v names one). Errors: the register's
// (audit.ErrInvalidIncident, the ledger's).
func (c *Compliance) OpenIncident(ctx context.Context, actor audit.Name, v audit.IncidentVersion) (audit.StoredVersion, error) {
	if v.Incident == "" {
		v.Incident = audit.NewIncidentID(c.d.Now())
	}
	v.Version = 1
	if v.Source == "" {
		v.Source = audit.SourceAdmin
	}
	return c.d.Register.OpenIncident(ctx, actor, v)
}

// UpdateIncident appends a version: the latest with the JSON patch applied
// (the register assigns incident and version, whatever the patch says).
// Errors: ErrInvalidField (a patch that does not apply); the register's.
func (c *Compliance) UpdateIncident(ctx context.Context, actor audit.Name, id audit.Name, patch json.RawMessage) (audit.StoredVersion, error) {
	return c.d.Register.UpdateIncident(ctx, actor, id, func(v *audit.IncidentVersion) error {
		version, id := v.Version, v.Incident
		if err := json.Unmarshal(patch, v); err != nil {
			return ErrInvalidField.Withf("%v", err)
		}
		v.Version, v.Incident = version, id
		return nil
	})
}

// AddNotice records a notice sent. Errors: the register's.
func (c *Compliance) AddNotice(ctx context.Context, actor audit.Name, n audit.Notice) (audit.StoredNotice, error) {
	return c.d.Register.AddNotice(ctx, actor, n)
}

// ScanLedger hands fn the ledger rows in [from, to] (seq; from 0: 1; to 0:
// the head), every tenant's: the operator's view. A tenant principal's
// listing is its tenant log instead (ScanTenantLog). It is a compliance
// stream.
//
// Errors: the Gate's before any row; the ledger's; fn's.
func (c *Compliance) ScanLedger(ctx context.Context, p tenancy.Principal, from, to uint64, fn func(audit.Record) error) error {
	release, err := c.openRange(p, from, to)
	if err != nil {
		return err
	}
	defer release()
	if from == 0 {
		from = 1
	}
	return c.d.Ledger.Scan(ctx, from, to, fn)
}

// ScanTenantLog is the ledger listing of a tenant principal: the leaves of
// tenant t's log (its own; an operator may name any tenant's)
// (audit.TenantLeaf: its entries verbatim, and the entries that name it
// with other tenants — shared violations, incident events — as redacted
// audit.TenantViews) at positions from..to (to 0: its end), in position
// order. The listing IS the log: row i is the leaf at position i, the
// exact bytes hashed, so a tenant checks a row against its tenant
// checkpoint with the inclusion proof of position i. It never carries the
// global sequence number, the chain hashes (which cover it) or the entry's
// tenant column (which may name another tenant): those would count other
// tenants' traffic, or name them. Positions are stable: the log only
// grows. Each call indexes the entries appended since the last and reads
// the rows it lists, never the whole ledger. A compliance stream.
//
// Errors: ErrInvalidField (to before from); the Gate's before any row; the
// ledger's; fn's.
func (c *Compliance) ScanTenantLog(ctx context.Context, p tenancy.Principal, t cloison.TenantID, from, to uint64, fn func(audit.TenantLogEntry) error) error {
	release, err := c.openRange(p, from, to)
	if err != nil {
		return err
	}
	defer release()
	return c.d.Ledger.TenantEntries(ctx, t, from, to, fn)
}

// openRange checks a listing's range from..to (to 0: the end), then takes
// the listing's place among the compliance streams: a range refused costs
// no slot.
// Errors: ErrInvalidField (to before from); the Gate's.
func (c *Compliance) openRange(p tenancy.Principal, from, to uint64) (release func(), err error) {
	if to != 0 && to < from {
		return nil, ErrInvalidField.Withf("to (%d) is before from (%d)", to, from)
	}
	return c.d.Gate.Acquire(p.Tenant, Operator(p))
}

// RegisterCheck is the register held to the ledger
// (RegisterStore.CheckRegister), as the verify route and the register
// views report it: a row missing from the register is a failure there,
// never a shorter list.
type RegisterCheck struct {
	OK       bool `json:"ok"`
	Failures int  `json:"failures"`
	// Problems names each disagreement; operators only (one may name an
	// incident or tenants another tenant may not see).
	Problems []string `json:"problems,omitempty"`
}

// ErrRegisterMismatch: the register disagrees with the ledger; a transport
// that cannot carry a RegisterCheck beside the register answers this
// instead of a register it cannot vouch for.
var ErrRegisterMismatch = cloison.NewError(cloison.CodeConflict, "the incident register disagrees with the ledger; run a verification")

// CheckRegister holds the whole register to the ledger for p: an operator
// gets every problem named, a tenant their number.
// Errors: the register's (not a disagreement: that is the result).
func (c *Compliance) CheckRegister(ctx context.Context, p tenancy.Principal) (RegisterCheck, error) {
	problems, err := c.d.Register.CheckRegister(ctx)
	if err != nil {
		return RegisterCheck{}, err
	}
	rc := RegisterCheck{OK: len(problems) == 0, Failures: len(problems)}
	if Operator(p) {
		for _, e := range problems {
			rc.Problems = append(rc.Problems, e.Error())
		}
	}
	return rc, nil
}

// VerifyLedger verifies the whole chain and holds the register to it;
// breaks are a result (every one the verifier found, *audit.Breaks: a
// known-bad entry never hides a later one), not an error, and so are the
// register's disagreements (RegisterCheck): a deleted register row fails
// the verification. A compliance stream.
// Errors: the Gate's; the ledger's other than a break; the register's.
func (c *Compliance) VerifyLedger(ctx context.Context, p tenancy.Principal) (audit.Result, *audit.Breaks, RegisterCheck, error) {
	release, err := c.d.Gate.Acquire(p.Tenant, Operator(p))
	if err != nil {
		return audit.Result{}, nil, RegisterCheck{}, err
	}
	defer release()
	res, err := c.d.Ledger.Verify(ctx, c.d.Verify)
	var bs *audit.Breaks
	if err != nil && !errors.As(err, &bs) {
		var be *audit.BreakError
		if !errors.As(err, &be) {
			return res, nil, RegisterCheck{}, err
		}
		bs = &audit.Breaks{All: []*audit.BreakError{be}}
	}
	rc, err := c.CheckRegister(ctx, p)
	if err != nil {
		return res, bs, RegisterCheck{}, err
	}
	return res, bs, rc, nil
}

// Export writes a signed export of the ledger rows in [from, to] (to 0:
// the head) into a temporary folder, hands each of its files to each (its
// name and path, in name order), and removes the folder. The export is
// ledgered by the store under actor. A compliance stream.
//
// Errors: ErrNoExportKey; ErrInvalidField (to before from); the Gate's;
// the ledger's; each's.
func (c *Compliance) Export(ctx context.Context, p tenancy.Principal, actor audit.Name, from, to uint64, each func(name, path string) error) error {
	if c.d.ExportKey == nil {
		return ErrNoExportKey
	}
	if to != 0 && to < from {
		return ErrInvalidField.Withf("to (%d) is before from (%d)", to, from)
	}
	release, err := c.d.Gate.Acquire(p.Tenant, Operator(p))
	if err != nil {
		return err
	}
	defer release()
	dir, err := os.MkdirTemp("", "cloison-export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := c.d.Ledger.Export(ctx, export.Options{Dir: dir, From: from, To: to, Key: c.d.ExportKey, Actor: actor}); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := each(e.Name(), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// noticeDeadlines returns each tenant's contractual notice deadline in
// hours (tenancy.Tenant.NoticeDeadlineHours), read now.
func (c *Compliance) noticeDeadlines(ctx context.Context) (func(cloison.TenantID) int, error) {
	ts, err := c.d.Tenants.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	hours := make(map[cloison.TenantID]int, len(ts))
	for _, t := range ts {
		hours[t.ID] = t.NoticeDeadlineHours
	}
	return func(t cloison.TenantID) int { return hours[t] }, nil
}

// OperatorIncident is an operator's view of a register entry: the whole
// entry and, per affected tenant, its notice against the contract's
// deadline (sent on time, late, overdue, pending).
type OperatorIncident struct {
	audit.IncidentFile
	NoticeDeadlines []audit.NoticeDue
}

// TenantIncident is a tenant's view: its redacted entry and its own notice
// line only.
type TenantIncident struct {
	audit.TenantIncident
	NoticeDeadlines []audit.NoticeDue
}

// IncidentViews is fs as p may see them (an OperatorIncident for an
// operator, a TenantIncident for a tenant), each with its notice deadlines
// at the clock's now. Errors: the tenant store's.
func (c *Compliance) IncidentViews(ctx context.Context, p tenancy.Principal, fs []audit.IncidentFile) ([]any, error) {
	hours, err := c.noticeDeadlines(ctx)
	if err != nil {
		return nil, err
	}
	now := c.d.Now()
	out := make([]any, len(fs))
	for i, f := range fs {
		dues := f.NoticeDues(hours, now)
		if Operator(p) {
			out[i] = OperatorIncident{IncidentFile: f, NoticeDeadlines: dues}
		} else {
			out[i] = TenantIncident{TenantIncident: f.ForTenant(p.Tenant), NoticeDeadlines: audit.ForTenantDues(dues, p.Tenant)}
		}
	}
	return out, nil
}

// OverdueNotices counts, over the whole register, the tenants whose notice
// is overdue at the clock's now (bounded to 5 s: it runs at metrics scrape
// time). Errors: the register's and the tenant store's.
func (c *Compliance) OverdueNotices(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := c.d.Now()
	fs, err := c.d.Register.Incidents(ctx)
	if err != nil {
		return 0, err
	}
	hours, err := c.noticeDeadlines(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range fs {
		for _, d := range f.NoticeDues(hours, now) {
			if d.Status == audit.NoticeOverdue {
				n++
			}
		}
	}
	return n, nil
}

// ExportVerification is an export checked by this node
// (Compliance.VerifyExport), in words for the console.
type ExportVerification struct {
	OK bool `json:"ok"`
	// Result says what was checked and what it found, in words.
	Result string `json:"result"`
	// From and To are the ledger range the manifest covers (0 0: unknown).
	From uint64 `json:"from,omitempty"`
	To   uint64 `json:"to,omitempty"`
	// Incidents counts the register entries checked.
	Incidents int `json:"incidents,omitempty"`
}

// VerifyExport checks the export directory dir as cloisonctl audit
// verify-export does (export.VerifyDir), trusting this node's export
// public key for the manifest and its checkpoint keys for the checkpoint.
// A failed verification is a result, not an error. A compliance stream.
// Errors: ErrNoExportKey; the Gate's.
func (c *Compliance) VerifyExport(ctx context.Context, p tenancy.Principal, dir string) (ExportVerification, error) {
	if c.d.ExportKey == nil {
		return ExportVerification{}, ErrNoExportKey
	}
	release, err := c.d.Gate.Acquire(p.Tenant, Operator(p))
	if err != nil {
		return ExportVerification{}, err
	}
	defer release()
	mk := audit.KeySet(c.d.ExportKey.Public().(ed25519.PublicKey))
	rep, err := export.VerifyDir(dir, mk, c.d.Verify.Keys)
	if err != nil {
		return ExportVerification{Result: "verification failed: " + strings.ReplaceAll(err.Error(), dir+string(os.PathSeparator), "")}, nil
	}
	return ExportVerification{
		OK: true, From: rep.Manifest.From, To: rep.Manifest.To, Incidents: rep.Incidents,
		Result: fmt.Sprintf("verified: manifest signed by %s; every file's SHA-256; the ledger chain %d..%d and its checkpoint; %d register entries; the CSVs and the PDF re-rendered byte for byte",
			rep.Manifest.KeyID, rep.Manifest.From, rep.Manifest.To, rep.Incidents),
	}, nil
}

// VerifyExportFile checks one file of an export against the export's
// signed manifest (its text, manifest.txt): the manifest's signature with
// this node's export public key, and that a file it lists has the file's
// size and SHA-256. It vouches for the file being the one this node
// signed; the chain, checkpoint and renderings are VerifyExport's, over
// the whole export. A failed verification is a result, not an error.
// Errors: ErrNoExportKey; the Gate's.
func (c *Compliance) VerifyExportFile(ctx context.Context, p tenancy.Principal, manifest []byte, size int64, sum audit.Digest) (ExportVerification, error) {
	if c.d.ExportKey == nil {
		return ExportVerification{}, ErrNoExportKey
	}
	release, err := c.d.Gate.Acquire(p.Tenant, Operator(p))
	if err != nil {
		return ExportVerification{}, err
	}
	defer release()
	m, err := export.ParseManifest(manifest)
	if err == nil {
		err = m.Verify(audit.KeySet(c.d.ExportKey.Public().(ed25519.PublicKey)))
	}
	if err != nil {
		return ExportVerification{Result: "verification failed: " + err.Error()}, nil
	}
	for _, f := range m.Files {
		if f.Size == size && f.SHA256 == sum {
			return ExportVerification{OK: true, From: m.From, To: m.To,
				Result: fmt.Sprintf("verified: %s is the file the manifest signed by %s lists (size and SHA-256), of the export of ledger %d..%d; the chain, checkpoint and renderings are checked over the whole export (ZIP)",
					f.Name, m.KeyID, m.From, m.To)}, nil
		}
	}
	return ExportVerification{Result: "verification failed: no file of the signed manifest has this file's size and SHA-256"}, nil
}
