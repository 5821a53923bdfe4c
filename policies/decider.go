package policies

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

//go:embed rego/*.rego
var shipped embed.FS

// Query is the rule every bundle must define: an object with allow
// (boolean), reasons (array of {code, message}), tier, zeroing and limits.
const Query = "data.cloison.policy.decision"

// Errors.
var (
	// ErrDenied: the policy refused the request. The errors Decide returns
	// for a denial are *DeniedError values, which match ErrDenied and carry
	// the reasons' code (permission_denied, context_length_exceeded,
	// unavailable, invalid_request_error).
	ErrDenied = cloison.NewError(cloison.CodePermissionDenied, "policies: request denied by policy")
	// ErrEvaluation: the policy could not decide (evaluation error,
	// undefined decision, non-boolean allow, malformed output). The request
	// is denied; the failure is the platform's, not the caller's.
	ErrEvaluation = cloison.NewError(cloison.CodeInternal, "policies: policy evaluation failed")
	// ErrCanceled, ErrDeadline: the caller's context ended during the
	// evaluation; the request is denied, and the failure is neither the
	// bundle's nor the platform's.
	ErrCanceled = cloison.NewError(cloison.CodeCanceled, "policies: evaluation canceled")
	ErrDeadline = cloison.NewError(cloison.CodeDeadlineExceeded, "policies: evaluation deadline exceeded")
	// ErrBundle: Reload refused a bundle (it does not compile, a builtin it
	// calls is not allowed, its tests fail, or it breaks a platform
	// invariant). The previous bundle keeps serving.
	ErrBundle = cloison.NewError(cloison.CodeInvalid, "policies: bundle refused")
)

// Request is what the caller asks for.
type Request struct {
	Model        string
	PromptTokens int
	MaxTokens    int
}

// Input is everything a decision may look at.
type Input struct {
	Principal   tenancy.Principal
	Tenant      tenancy.Tenant
	Request     Request
	Attestation attest.Attestation // its Labels are this node's
	Placement   Placement
}

// Placement is where the request would be processed besides this node
// (whose labels are the attestation's): on a decode node (Split), the
// labels of the prefill nodes it may ask now.
type Placement struct {
	Split   bool
	Prefill []attest.Labels
}

// Complies reports whether the tenant's residency allows this node and, on
// a decode node, at least one of its prefill nodes; reason says which part
// fails. It is the floor every allowed decision must meet (enforceFloor),
// whatever the bundle says; the shipped bundle (residency.rego) denies the
// same requests with permission_denied.
func (in Input) Complies() (ok bool, reason string) {
	r := in.Tenant.Residency
	if !in.Attestation.Labels.Serves(r.Regions, r.Tier) {
		return false, fmt.Sprintf("this node (region %q, tier %q) is outside this tenant's residency", in.Attestation.Labels.Region, in.Attestation.Labels.Tier)
	}
	if in.Placement.Split && !slices.ContainsFunc(in.Placement.Prefill, func(l attest.Labels) bool { return l.Serves(r.Regions, r.Tier) }) {
		return false, "no prefill node in the regions and tier this tenant's residency allows"
	}
	return true, ""
}

// Reason is one rule's refusal.
type Reason struct {
	Code    cloison.Code `json:"code"`
	Message string       `json:"message"`
}

// Limits are what the decision allows this request; the API applies every
// one (see the package doc for which it clamps and which it refuses). In an
// allowed decision each is at least 1 and no looser than the tenant's quota,
// the served context and the request (otherwise the decision is
// ErrEvaluation).
type Limits struct {
	MaxContext      int `json:"max_context"`
	MaxTokens       int `json:"max_tokens"` // the completion budget: max_tokens cut to the room left
	KVPages         int `json:"kv_pages"`
	MaxConcurrent   int `json:"max_concurrent"`
	TokensPerMinute int `json:"tokens_per_minute"`
}

// Decision is one policy decision: what the API applies, and what it writes
// to the ledger as a policy.decision event (see Record).
type Decision struct {
	ID      string
	Allow   bool
	Reasons []Reason
	// Tier and Zeroing are the isolation to apply; never laxer than the
	// tenant record's, and dedicated/always for sensitive data whatever the
	// bundle says. The API refuses the request if the pool cannot apply them.
	Tier    isolation.Tier
	Zeroing isolation.Zeroing
	Limits  Limits
	// Revision is the bundle's digest: "sha256:" + hex of SHA-256 over its
	// sorted file names and sources (Digest).
	Revision string
	// InputDigest is "sha256:" + hex of SHA-256 over the canonical JSON of
	// the input document the bundle saw (keys sorted, no whitespace).
	InputDigest string
	Latency     time.Duration
	At          time.Time
}

// Record is the ledger payload of a decision: identifiers, digests, the
// outcome and reason codes, never prompt text.
type Record struct {
	DecisionID  string           `json:"decision_id"`
	Tenant      cloison.TenantID `json:"tenant"`
	Subject     string           `json:"subject"`
	Allow       bool             `json:"allow"`
	Reasons     []Reason         `json:"reasons"`
	Tier        string           `json:"tier"`
	Zeroing     string           `json:"zeroing"`
	Limits      Limits           `json:"limits"`
	Revision    string           `json:"bundle_revision"`
	InputDigest string           `json:"input_digest"`
	LatencyNS   int64            `json:"latency_ns"`
}

// Record returns the ledger payload of d for the principal in.
func (d Decision) Record(in Input) Record {
	reasons := d.Reasons
	if reasons == nil {
		reasons = []Reason{}
	}
	return Record{DecisionID: d.ID, Tenant: in.Tenant.ID, Subject: in.Principal.Subject, Allow: d.Allow, Reasons: reasons,
		Tier: d.Tier.String(), Zeroing: d.Zeroing.String(), Limits: d.Limits, Revision: d.Revision,
		InputDigest: d.InputDigest, LatencyNS: d.Latency.Nanoseconds()}
}

// DeniedError is a denial: errors.Is(err, ErrDenied) holds, and ErrorCode
// reports the most pressing reason's code.
type DeniedError struct {
	DecisionID string
	Reasons    []Reason
}

// codeOrder ranks reason codes: the first present is the error's code.
var codeOrder = []cloison.Code{cloison.CodeUnavailable, cloison.CodePermissionDenied, cloison.CodeInvalid,
	cloison.CodeContextLengthExceeded, cloison.CodeInternal}

func (e *DeniedError) main() Reason {
	for _, c := range codeOrder {
		for _, r := range e.Reasons {
			if r.Code == c {
				return r
			}
		}
	}
	return Reason{Code: cloison.CodePermissionDenied, Message: "denied"}
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s (decision %s): %s", ErrDenied.Message, e.DecisionID, e.main().Message)
}

// PublicMessage is the whole text: the decision id is the caller's own (it
// is also the X-Cloison-Decision-Id header) and reason messages are written
// by the policy author for clients.
func (e *DeniedError) PublicMessage() string { return e.Error() }

// ErrorCode reports the code of the most pressing reason.
func (e *DeniedError) ErrorCode() cloison.Code { return e.main().Code }

// Unwrap makes errors.Is(err, ErrDenied) hold.
func (e *DeniedError) Unwrap() error { return ErrDenied }

// Decider evaluates the policy bundle for each request. The bundle is
// compiled and prepared once (New, Reload); Decide only evaluates. Safe for
// concurrent use; Reload swaps bundles atomically, so each decision sees
// exactly one bundle.
type Decider struct {
	reloadMu sync.Mutex             // serializes Reload
	cur      atomic.Pointer[bundle] // the bundle serving decisions
}

type bundle struct {
	query    rego.PreparedEvalQuery
	revision string
	files    []string
	sources  map[string]string // every file of the bundle, tests included
}

// Shipped returns the embedded bundle's sources (policies and their
// *_test.rego files) by file name.
func Shipped() map[string]string {
	out := map[string]string{}
	_ = fs.WalkDir(shipped, "rego", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := shipped.ReadFile(p)
		if err != nil {
			return err
		}
		out[path.Base(p)] = string(b)
		return nil
	})
	return out
}

// New prepares the shipped bundle (its tests and the platform checks run
// first). Errors: ErrBundle.
func New(ctx context.Context) (*Decider, error) {
	d := &Decider{}
	if _, err := d.Reload(ctx, Shipped()); err != nil {
		return nil, err
	}
	return d, nil
}

// Revision returns the serving bundle's digest.
func (d *Decider) Revision() string {
	if b := d.cur.Load(); b != nil {
		return b.revision
	}
	return ""
}

// Files returns the serving bundle's file names, sorted.
func (d *Decider) Files() []string {
	if b := d.cur.Load(); b != nil {
		return slices.Clone(b.files)
	}
	return nil
}

// Bundle returns the serving bundle: its revision and every file's source
// by name (its *_test.rego files included), as Reload was given them; ""
// and nil before the first.
func (d *Decider) Bundle() (revision string, sources map[string]string) {
	if b := d.cur.Load(); b != nil {
		return b.revision, maps.Clone(b.sources)
	}
	return "", nil
}

// Bundle limits on what Reload accepts.
const (
	MaxFiles     = 64
	MaxFileBytes = 256 << 10
)

// Digest returns a bundle's revision: "sha256:" + hex of SHA-256 over each
// file, in name order, as name length, name, source length, source.
func Digest(sources map[string]string) string {
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%d:%s%d:%s", len(n), n, len(sources[n]), sources[n])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Reload prepares a new bundle fully — compile, prepare, run its
// *_test.rego files (all must pass), check the platform invariants on probe
// inputs — and only then swaps it in. A refused bundle changes nothing: the
// old one keeps serving. It returns the new revision. Errors: ErrBundle.
func (d *Decider) Reload(ctx context.Context, sources map[string]string) (string, error) {
	return d.ReloadWith(ctx, sources, nil)
}

// ReloadWith is Reload with a commit step: once the bundle is prepared and
// has passed every check, commit (when not nil) is called with its
// revision — the caller ledgers the reload there — and the bundle is
// swapped in only if commit returns nil. Reloads are serialised from
// preparation to swap, so the ledger's order of policy.reloaded events is
// the order in which bundles served. Errors: ErrBundle, or commit's error
// as is (the old bundle keeps serving).
func (d *Decider) ReloadWith(ctx context.Context, sources map[string]string, commit func(revision string) error) (string, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	b, err := prepare(ctx, sources)
	if err != nil {
		return "", err
	}
	if err := runTests(ctx, sources); err != nil {
		return "", err
	}
	if err := b.probe(ctx); err != nil {
		return "", err
	}
	if commit != nil {
		if err := commit(b.revision); err != nil {
			return "", err
		}
	}
	d.cur.Store(b)
	return b.revision, nil
}

// capabilities are this version's builtins minus those that reach outside
// the process or are not deterministic: a decision depends on its input and
// the bundle only, so that its input digest and revision explain it.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	banned := map[string]bool{"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true, "rand.intn": true,
		"uuid.rfc4122": true, "time.now_ns": true, "trace": true}
	c.Builtins = slices.DeleteFunc(slices.Clone(c.Builtins), func(b *ast.Builtin) bool { return banned[b.Name] })
	return c
}

// prepare compiles and prepares the policy files of sources (tests
// excluded).
func prepare(ctx context.Context, sources map[string]string) (*bundle, error) {
	if len(sources) == 0 || len(sources) > MaxFiles {
		return nil, fmt.Errorf("%w: %d files (want 1 to %d)", ErrBundle, len(sources), MaxFiles)
	}
	opts := []func(*rego.Rego){
		rego.Query(Query),
		rego.Capabilities(capabilities()),
		rego.StrictBuiltinErrors(true),
		rego.EnablePrintStatements(false),
		rego.SetRegoVersion(ast.RegoV1),
	}
	var files []string
	for name, src := range sources {
		if !strings.HasSuffix(name, ".rego") || strings.ContainsAny(name, "/\\") || len(src) > MaxFileBytes {
			return nil, fmt.Errorf("%w: file %q (want a plain name ending in .rego, at most %d bytes)", ErrBundle, name, MaxFileBytes)
		}
		files = append(files, name)
		if isTest(name) {
			continue
		}
		opts = append(opts, rego.Module(name, src))
	}
	sort.Strings(files)
	q, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	return &bundle{query: q, revision: Digest(sources), files: files, sources: maps.Clone(sources)}, nil
}

func isTest(name string) bool { return strings.HasSuffix(name, "_test.rego") }

// Decide evaluates the serving bundle on in. The Decision is always
// complete (ID, revision, input digest, latency) and is what the caller
// ledgers. The error is nil when the request is allowed; a *DeniedError
// (ErrDenied) when the bundle denies it; ErrEvaluation when the bundle
// could not decide — evaluation error, undefined decision, non-boolean
// allow or any malformed output — in which case Allow is false too;
// ErrCanceled or ErrDeadline when ctx ended first (denied as well).
func (d *Decider) Decide(ctx context.Context, in Input) (Decision, error) {
	b := d.cur.Load()
	if b == nil { // a zero Decider: nothing prepared, nothing allowed
		t, z := strictest(in)
		return Decision{ID: newID(), At: time.Now(), Tier: t, Zeroing: z,
				Reasons: []Reason{{Code: cloison.CodeInternal, Message: "no policy bundle"}}},
			fmt.Errorf("%w: no bundle prepared", ErrEvaluation)
	}
	return b.decide(ctx, in)
}

func (b *bundle) decide(ctx context.Context, in Input) (Decision, error) {
	start := time.Now()
	dec := Decision{ID: newID(), Revision: b.revision, At: start, Tier: in.Tenant.Tier, Zeroing: in.Tenant.Zeroing}
	doc := document(in)
	if raw, err := json.Marshal(doc); err == nil {
		sum := sha256.Sum256(raw)
		dec.InputDigest = "sha256:" + hex.EncodeToString(sum[:])
	}
	rs, err := b.query.Eval(ctx, rego.EvalInput(doc))
	if err == nil {
		err = dec.read(rs)
	}
	if err == nil {
		err = dec.enforceFloor(in)
	}
	if err == nil {
		// OPA may finish before it notices a cancellation: a request whose
		// context ended is denied whatever the bundle said.
		err = ctx.Err()
	}
	dec.Latency = time.Since(start)
	if err != nil {
		dec.Allow = false
		dec.Reasons = []Reason{{Code: cloison.CodeInternal, Message: "policy evaluation failed"}}
		dec.Tier, dec.Zeroing = strictest(in)
		dec.Limits = Limits{}
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			return dec, fmt.Errorf("%w (decision %s): %w", ErrCanceled, dec.ID, ctx.Err())
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return dec, fmt.Errorf("%w (decision %s): %w", ErrDeadline, dec.ID, ctx.Err())
		}
		return dec, fmt.Errorf("%w (decision %s, bundle %s): %w", ErrEvaluation, dec.ID, dec.Revision, err)
	}
	if !dec.Allow {
		return dec, &DeniedError{DecisionID: dec.ID, Reasons: dec.Reasons}
	}
	return dec, nil
}

// strictest is the isolation applied when the bundle cannot say.
func strictest(in Input) (isolation.Tier, isolation.Zeroing) {
	t, z := in.Tenant.Tier, in.Tenant.Zeroing
	if in.Tenant.Classification.Sensitive() {
		t, z = isolation.TierDedicated, isolation.ZeroAlways
	}
	return t, z
}

// enforceFloor holds the platform invariants whatever the bundle says: no
// service to an inactive tenant or on a failed attestation, and isolation
// never laxer than the tenant record's (dedicated/always for sensitive
// data). A bundle that allows what these forbid is broken: its decision
// becomes an evaluation failure.
func (dec *Decision) enforceFloor(in Input) error {
	if !dec.Allow {
		return nil
	}
	switch {
	case in.Tenant.Status != tenancy.StatusActive:
		return fmt.Errorf("bundle allowed a tenant whose status is %q", in.Tenant.Status)
	case !in.Attestation.OK:
		return errors.New("bundle allowed service while the capacity attestation fails")
	case in.Principal.Tenant != in.Tenant.ID:
		return errors.New("bundle allowed a principal of another tenant")
	}
	if ok, why := in.Complies(); !ok {
		return errors.New("bundle allowed a request its tenant's residency forbids: " + why)
	}
	t, z := strictest(in)
	if dec.Tier < t || dec.Zeroing < z {
		return fmt.Errorf("bundle chose %v/%v, laxer than the required %v/%v", dec.Tier, dec.Zeroing, t, z)
	}
	return dec.Limits.within(in)
}

// within holds an allowed decision's limits to what the API can apply: each
// at least 1 (a zero would admit nothing, or mean "no limit" to a careless
// reader) and none looser than the tenant record's quota, the served
// context or the request itself. A bundle may tighten a tenant's quotas,
// never loosen them.
func (l Limits) within(in Input) error {
	q := in.Tenant.Quotas
	maxCtx := in.Attestation.ServedContext
	if q.MaxContext > 0 {
		maxCtx = min(maxCtx, q.MaxContext)
	}
	for _, c := range []struct {
		name     string
		got, top int
	}{
		{"max_context", l.MaxContext, maxCtx},
		{"max_tokens", l.MaxTokens, in.Request.MaxTokens},
		{"kv_pages", l.KVPages, q.KVPages},
		{"max_concurrent", l.MaxConcurrent, q.MaxConcurrent},
		{"tokens_per_minute", l.TokensPerMinute, q.TokensPerMinute},
	} {
		if c.got < 1 || c.got > c.top {
			return fmt.Errorf("bundle allowed with limits.%s = %d (want 1 to %d)", c.name, c.got, c.top)
		}
	}
	return nil
}

// read parses the decision object; anything but the exact shape is an error.
func (dec *Decision) read(rs rego.ResultSet) error {
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return errors.New("decision undefined")
	}
	if len(rs) > 1 || len(rs[0].Expressions) > 1 {
		return errors.New("more than one decision")
	}
	obj, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return fmt.Errorf("decision is %T, not an object", rs[0].Expressions[0].Value)
	}
	allow, ok := obj["allow"].(bool)
	if !ok {
		return fmt.Errorf("allow is %T, not a boolean", obj["allow"])
	}
	reasons, ok := obj["reasons"].([]any)
	if !ok {
		return fmt.Errorf("reasons is %T, not an array", obj["reasons"])
	}
	dec.Reasons = make([]Reason, 0, len(reasons))
	for _, r := range reasons {
		m, ok := r.(map[string]any)
		code, ok1 := m["code"].(string)
		msg, ok2 := m["message"].(string)
		if !ok || !ok1 || !ok2 {
			return fmt.Errorf("reason %v is not {code, message}", r)
		}
		dec.Reasons = append(dec.Reasons, Reason{Code: knownCode(code), Message: msg})
	}
	if allow && len(dec.Reasons) > 0 {
		return errors.New("allow with reasons to deny")
	}
	if !allow && len(dec.Reasons) == 0 {
		dec.Reasons = []Reason{{Code: cloison.CodePermissionDenied, Message: "denied by policy"}}
	}
	ts, _ := obj["tier"].(string)
	tier, err := isolation.ParseTier(ts)
	if err != nil {
		return err
	}
	zs, _ := obj["zeroing"].(string)
	z, err := isolation.ParseZeroing(zs)
	if err != nil {
		return err
	}
	lim, ok := obj["limits"].(map[string]any)
	if !ok {
		return fmt.Errorf("limits is %T, not an object", obj["limits"])
	}
	var l Limits
	for key, dst := range map[string]*int{"max_context": &l.MaxContext, "max_tokens": &l.MaxTokens, "kv_pages": &l.KVPages,
		"max_concurrent": &l.MaxConcurrent, "tokens_per_minute": &l.TokensPerMinute} {
		n, err := toInt(lim[key])
		if err != nil {
			return fmt.Errorf("limits.%s: %w", key, err)
		}
		*dst = n
	}
	dec.Allow, dec.Tier, dec.Zeroing, dec.Limits = allow, tier, z, l
	return nil
}

// knownCode keeps reason codes within the API's table: anything else
// becomes permission_denied.
func knownCode(s string) cloison.Code {
	switch c := cloison.Code(s); c {
	case cloison.CodePermissionDenied, cloison.CodeContextLengthExceeded, cloison.CodeUnavailable, cloison.CodeInvalid,
		cloison.CodeQuotaExceeded:
		return c
	}
	return cloison.CodePermissionDenied
}

func toInt(v any) (int, error) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		if err != nil || i < -1<<31 || i > 1<<31-1 {
			return 0, fmt.Errorf("%v is not an int32", n)
		}
		return int(i), nil
	case int:
		return n, nil
	case int64:
		return int(n), nil
	case float64:
		if n != float64(int32(n)) {
			return 0, fmt.Errorf("%v is not an int32", n)
		}
		return int(n), nil
	}
	return 0, fmt.Errorf("%T is not a number", v)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "pd_" + hex.EncodeToString(b[:])
}

// document is the input document the bundle sees. It is built field by
// field: nothing reaches the policy (or the input digest) by accident —
// no key material, no prompt text.
func document(in Input) map[string]any {
	scopes := make([]any, len(in.Principal.Scopes))
	for i, s := range in.Principal.Scopes {
		scopes[i] = string(s)
	}
	models := make([]any, len(in.Tenant.AllowedModels))
	for i, m := range in.Tenant.AllowedModels {
		models[i] = m
	}
	t, a, q := in.Tenant, in.Attestation, in.Tenant.Quotas
	regions := make([]any, len(t.Residency.Regions))
	for i, r := range t.Residency.Regions {
		regions[i] = r
	}
	prefill := make([]any, len(in.Placement.Prefill))
	for i, l := range in.Placement.Prefill {
		prefill[i] = map[string]any{"region": l.Region, "tier": l.Tier}
	}
	return map[string]any{
		"principal": map[string]any{
			"subject": in.Principal.Subject,
			"tenant":  string(in.Principal.Tenant),
			"scopes":  scopes,
			"issuer":  in.Principal.Issuer,
		},
		"tenant": map[string]any{
			"id":             string(t.ID),
			"status":         string(t.Status),
			"tier":           t.Tier.String(),
			"zeroing":        t.Zeroing.String(),
			"classification": string(t.Classification),
			"allowed_models": models,
			"residency":      map[string]any{"regions": regions, "tier": t.Residency.Tier},
			"quotas": map[string]any{
				"max_concurrent":    q.MaxConcurrent,
				"kv_pages":          q.KVPages,
				"tokens_per_minute": q.TokensPerMinute,
				"max_context":       q.MaxContext,
			},
		},
		"request": map[string]any{
			"model":         in.Request.Model,
			"prompt_tokens": in.Request.PromptTokens,
			"max_tokens":    in.Request.MaxTokens,
		},
		"attestation": map[string]any{
			"model_context":  a.ModelContext,
			"served_context": a.ServedContext,
			"pool_tokens":    a.PoolTokens,
			"pool_pages":     a.PoolPages,
			"page_tokens":    a.PageTokens,
			"k":              a.K,
			"zeroing":        a.Zeroing,
			"ok":             a.OK,
			"reason":         a.Reason,
			"model":          a.Model,
			"model_digest":   a.ModelDigest,
		},
		"node": map[string]any{
			"region":  a.Labels.Region,
			"tier":    a.Labels.Tier,
			"split":   in.Placement.Split,
			"prefill": prefill,
		},
	}
}
