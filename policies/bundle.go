package policies

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// TestResult is one Rego test's outcome.
type TestResult struct {
	Name   string // package.rule
	Pass   bool
	Detail string // the failing expression or the error, when not passing
}

// RunTests runs the *_test.rego rules of sources against its policy files
// with OPA's tester, under the same builtin restrictions as decisions.
// It returns one result per test, sorted by name; the error is for a bundle
// that does not compile (ErrBundle).
func RunTests(ctx context.Context, sources map[string]string) ([]TestResult, error) {
	modules := map[string]*ast.Module{}
	for name, src := range sources {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBundle, err)
		}
		// A test file's rules must not be able to stand in for policy rules:
		// the tests would pass on code that never serves.
		if isTest(name) && !strings.HasSuffix(m.Package.Path.String(), "_test") {
			return nil, fmt.Errorf("%w: test file %s declares %v; want a package ending in _test", ErrBundle, name, m.Package.Path)
		}
		modules[name] = m
	}
	compiler := ast.NewCompiler().WithCapabilities(capabilities()).WithEnablePrintStatements(false).
		WithDefaultRegoVersion(ast.RegoV1)
	ch, err := tester.NewRunner().SetCompiler(compiler).RaiseBuiltinErrors(true).SetTimeout(30*time.Second).
		SetModules(modules).RunTests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBundle, err)
	}
	var out []TestResult
	for r := range ch {
		tr := TestResult{Name: strings.TrimPrefix(r.Package, "data.") + "." + r.Name, Pass: r.Pass()}
		switch {
		case r.Error != nil:
			tr.Detail = r.Error.Error()
		case r.Fail && r.FailedAt != nil:
			tr.Detail = fmt.Sprintf("%v: %v", r.FailedAt.Location, r.FailedAt)
		case r.Fail:
			tr.Detail = "failed"
		case r.Skip:
			tr.Detail = "skipped"
			tr.Pass = false
		}
		out = append(out, tr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// runTests refuses a bundle whose tests do not all pass.
func runTests(ctx context.Context, sources map[string]string) error {
	hasTests := false
	for name := range sources {
		hasTests = hasTests || isTest(name)
	}
	if !hasTests {
		return nil
	}
	res, err := RunTests(ctx, sources)
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range res {
		if !r.Pass {
			failed = append(failed, r.Name+": "+r.Detail)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %d of %d tests fail: %s", ErrBundle, len(failed), len(res), strings.Join(failed, "; "))
	}
	return nil
}

// probeInput is a request every bundle must be able to decide on.
func probeInput() Input {
	t := tenancy.Tenant{ID: "probe", Name: "probe", Status: tenancy.StatusActive, Tier: isolation.TierShared,
		Zeroing: isolation.ZeroCrossTenant, Classification: tenancy.ClassInternal,
		Quotas:        tenancy.Quotas{MaxConcurrent: 1, KVPages: 16, TokensPerMinute: 1000, MaxContext: 256},
		AllowedModels: []string{"probe-model"}}
	return Input{
		Principal:   tenancy.Principal{Subject: "probe", Tenant: "probe", Scopes: []tenancy.Scope{tenancy.ScopeInfer}, TenantRecord: t},
		Tenant:      t,
		Request:     Request{Model: "probe-model", PromptTokens: 8, MaxTokens: 8},
		Attestation: attest.Attestation{ModelContext: 512, ServedContext: 512, PoolPages: 64, PageTokens: 16, PoolTokens: 1024, K: 1, Zeroing: "cross-tenant", OK: true},
	}
}

// probe checks a prepared bundle before it serves: it decides (allow or
// deny, never an evaluation failure) on a plain request, and it denies a
// suspended tenant, a failed attestation and a request its tenant's
// residency forbids (permission_denied) — the platform invariants that no
// bundle may lift.
func (b *bundle) probe(ctx context.Context) error {
	type check struct {
		name      string
		edit      func(*Input)
		mustDeny  bool
		wantCodes []cloison.Code
	}
	checks := []check{
		{"plain request", func(*Input) {}, false, nil},
		{"suspended tenant", func(in *Input) { in.Tenant.Status = tenancy.StatusSuspended }, true, nil},
		{"failed attestation", func(in *Input) {
			in.Attestation.OK, in.Attestation.Reason = false, "probe: pool too small"
		}, true, []cloison.Code{cloison.CodeUnavailable}},
		{"node outside the residency", func(in *Input) {
			in.Tenant.Residency = tenancy.Residency{Regions: []string{"probe-in"}}
			in.Attestation.Labels = attest.Labels{Region: "probe-out"}
		}, true, []cloison.Code{cloison.CodePermissionDenied}},
		{"no prefill node in the residency", func(in *Input) {
			in.Tenant.Residency = tenancy.Residency{Regions: []string{"probe-in"}}
			in.Attestation.Labels = attest.Labels{Region: "probe-in"}
			in.Placement = Placement{Split: true, Prefill: []attest.Labels{{Region: "probe-out"}}}
		}, true, []cloison.Code{cloison.CodePermissionDenied}},
		{"personal data", func(in *Input) {
			in.Tenant.Classification, in.Tenant.Tier, in.Tenant.Zeroing = tenancy.ClassPersonal, isolation.TierDedicated, isolation.ZeroAlways
		}, false, nil},
	}
	for _, c := range checks {
		in := probeInput()
		c.edit(&in)
		dec, err := b.decide(ctx, in)
		if errors.Is(err, ErrEvaluation) {
			return fmt.Errorf("%w: probe %q: %w", ErrBundle, c.name, err)
		}
		if c.mustDeny && dec.Allow {
			return fmt.Errorf("%w: probe %q: the bundle allows it", ErrBundle, c.name)
		}
		for _, code := range c.wantCodes {
			found := false
			for _, r := range dec.Reasons {
				found = found || r.Code == code
			}
			if !found {
				return fmt.Errorf("%w: probe %q: no reason of code %s", ErrBundle, c.name, code)
			}
		}
	}
	return nil
}
