package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

func newDecider(t testing.TB) *Decider {
	t.Helper()
	d, err := New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// baseInput is an active, internal-data tenant asking for 150 tokens of a
// model it may use, under a passing attestation.
func baseInput() Input {
	tn := tenancy.Tenant{ID: "acme", Name: "Acme", Status: tenancy.StatusActive, Tier: isolation.TierShared,
		Zeroing: isolation.ZeroCrossTenant, Classification: tenancy.ClassInternal,
		Quotas:        tenancy.Quotas{MaxConcurrent: 4, KVPages: 256, TokensPerMinute: 60000, MaxContext: 2048},
		AllowedModels: []string{"context-bag"}}
	att, err := attest.Capacity(attest.Config{ModelContext: 4096, PoolPages: 512, PageTokens: 16, Zeroing: isolation.ZeroCrossTenant})
	if err != nil {
		panic(err)
	}
	return Input{
		Principal:   tenancy.Principal{Subject: "svc", Tenant: "acme", Scopes: []tenancy.Scope{tenancy.ScopeInfer}, TenantRecord: tn},
		Tenant:      tn,
		Request:     Request{Model: "context-bag", PromptTokens: 100, MaxTokens: 50},
		Attestation: att,
	}
}

// The shipped bundle's Rego unit tests, run through OPA's tester.
func TestRegoUnitTests(t *testing.T) {
	res, err := RunTests(context.Background(), Shipped())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) < 15 {
		t.Fatalf("got %d Rego tests, want the shipped suite (at least 15)", len(res))
	}
	for _, r := range res {
		t.Run(r.Name, func(t *testing.T) {
			if !r.Pass {
				t.Fatal(r.Detail)
			}
		})
	}
}

// Each shipped rule, through the Go API. Defence layer 2 (capacity
// attestation): no service while it fails; layer 5 (scrubbing): personal
// and confidential data get dedicated pages zeroed always.
func TestShippedRules(t *testing.T) {
	d := newDecider(t)
	failedAtt, _ := attest.Capacity(attest.Config{ModelContext: 4096, PoolPages: 8, PageTokens: 16})
	cases := []struct {
		name    string
		edit    func(*Input)
		allow   bool
		code    cloison.Code // of the denial
		tier    isolation.Tier
		zeroing isolation.Zeroing
		maxTok  int
	}{
		{"plain request", func(*Input) {}, true, "", isolation.TierShared, isolation.ZeroCrossTenant, 50},
		{"personal ⇒ dedicated, always", func(in *Input) { in.Tenant.Classification = tenancy.ClassPersonal },
			true, "", isolation.TierDedicated, isolation.ZeroAlways, 50},
		{"confidential ⇒ dedicated, always", func(in *Input) { in.Tenant.Classification = tenancy.ClassConfidential },
			true, "", isolation.TierDedicated, isolation.ZeroAlways, 50},
		{"public keeps the record's isolation", func(in *Input) {
			in.Tenant.Classification, in.Tenant.Zeroing = tenancy.ClassPublic, isolation.ZeroNever
		}, true, "", isolation.TierShared, isolation.ZeroNever, 50},
		{"model not allowed", func(in *Input) { in.Request.Model = "other" }, false, cloison.CodePermissionDenied, 0, 0, 0},
		{"no model allowed", func(in *Input) { in.Tenant.AllowedModels = nil }, false, cloison.CodePermissionDenied, 0, 0, 0},
		{"exactly the tenant's max context", func(in *Input) { in.Request.PromptTokens, in.Request.MaxTokens = 2000, 48 },
			true, "", isolation.TierShared, isolation.ZeroCrossTenant, 48},
		{"over the tenant's max context", func(in *Input) { in.Request.PromptTokens, in.Request.MaxTokens = 2000, 49 },
			false, cloison.CodeContextLengthExceeded, 0, 0, 0},
		{"over the served context (no tenant max)", func(in *Input) {
			in.Tenant.Quotas.MaxContext = 0
			in.Request.PromptTokens, in.Request.MaxTokens = 4000, 97
		}, false, cloison.CodeContextLengthExceeded, 0, 0, 0},
		{"zero max tokens", func(in *Input) { in.Request.MaxTokens = 0 }, false, cloison.CodeInvalid, 0, 0, 0},
		{"attestation failing", func(in *Input) { in.Attestation = failedAtt }, false, cloison.CodeUnavailable, 0, 0, 0},
		{"attestation failing outranks the rest", func(in *Input) {
			in.Attestation, in.Request.Model = failedAtt, "other"
		}, false, cloison.CodeUnavailable, 0, 0, 0},
		{"suspended tenant", func(in *Input) { in.Tenant.Status = tenancy.StatusSuspended }, false, cloison.CodePermissionDenied, 0, 0, 0},
		{"principal of another tenant", func(in *Input) { in.Principal.Tenant = "other" }, false, cloison.CodePermissionDenied, 0, 0, 0},
		{"no infer scope", func(in *Input) { in.Principal.Scopes = []tenancy.Scope{tenancy.ScopeAdmin} }, false, cloison.CodePermissionDenied, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := baseInput()
			c.edit(&in)
			dec, err := d.Decide(context.Background(), in)
			if dec.Allow != c.allow {
				t.Fatalf("allow: got %v (%v, reasons %v), want %v", dec.Allow, err, dec.Reasons, c.allow)
			}
			if c.allow {
				if err != nil {
					t.Fatal(err)
				}
				if dec.Tier != c.tier || dec.Zeroing != c.zeroing || dec.Limits.MaxTokens != c.maxTok {
					t.Fatalf("got %v/%v max_tokens %d, want %v/%v %d", dec.Tier, dec.Zeroing, dec.Limits.MaxTokens, c.tier, c.zeroing, c.maxTok)
				}
				return
			}
			var de *DeniedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDenied) || de.DecisionID != dec.ID {
				t.Fatalf("got %v, want a *DeniedError for decision %s", err, dec.ID)
			}
			if got := cloison.ErrorCode(err); got != c.code {
				t.Fatalf("code: got %s, want %s (reasons %v)", got, c.code, dec.Reasons)
			}
		})
	}
}

// setBundle installs a bundle without Reload's tests and probes, so that
// Decide's own defences can be tested against broken bundles.
func setBundle(t *testing.T, d *Decider, src string) {
	t.Helper()
	b, err := prepare(context.Background(), map[string]string{"broken.rego": src})
	if err != nil {
		t.Fatal(err)
	}
	d.cur.Store(b)
}

const goodLimits = `limits := {"max_context": 10, "max_tokens": 1, "kv_pages": 1, "max_concurrent": 1, "tokens_per_minute": 1}`

// allowWith is a bundle that allows with the base input's quotas as limits,
// one of them replaced by field (`"name": value`).
func allowWith(field string) string {
	lim := map[string]string{"max_context": "2048", "max_tokens": "50", "kv_pages": "256", "max_concurrent": "4", "tokens_per_minute": "60000"}
	name, value, _ := strings.Cut(field, ": ")
	lim[strings.Trim(name, `"`)] = value
	return fmt.Sprintf("package cloison.policy\ndecision := {\"allow\": true, \"reasons\": [], \"tier\": \"shared\", \"zeroing\": \"cross-tenant\", "+
		"\"limits\": {\"max_context\": %s, \"max_tokens\": %s, \"kv_pages\": %s, \"max_concurrent\": %s, \"tokens_per_minute\": %s}}",
		lim["max_context"], lim["max_tokens"], lim["kv_pages"], lim["max_concurrent"], lim["tokens_per_minute"])
}

// Deny on doubt (defence layer 7, fail closed): whatever goes
// wrong in the bundle, the request is denied with ErrEvaluation, never
// allowed.
func TestDenyOnDoubt(t *testing.T) {
	head := "package cloison.policy\n" + goodLimits + "\n"
	cases := map[string]string{
		"undefined decision":  head + `decision := {"allow": true} if false`,
		"allow is a string":   head + `decision := {"allow": "true", "reasons": [], "tier": "shared", "zeroing": "always", "limits": limits}`,
		"allow is a number":   head + `decision := {"allow": 1, "reasons": [], "tier": "shared", "zeroing": "always", "limits": limits}`,
		"allow missing":       head + `decision := {"reasons": [], "tier": "shared", "zeroing": "always", "limits": limits}`,
		"decision not object": head + `decision := true`,
		"evaluation error":    head + `decision := {"allow": to_number(input.request.model) > 0, "reasons": [], "tier": "shared", "zeroing": "always", "limits": limits}`,
		"conflicting values": head + `decision := {"allow": true, "reasons": [], "tier": "shared", "zeroing": "always", "limits": limits} if input.request.max_tokens > 0
decision := {"allow": false, "reasons": [], "tier": "shared", "zeroing": "always", "limits": limits} if input.request.prompt_tokens > 0`,
		"reasons malformed":                 head + `decision := {"allow": false, "reasons": ["no"], "tier": "shared", "zeroing": "always", "limits": limits}`,
		"allow with reasons":                head + `decision := {"allow": true, "reasons": [{"code": "permission_denied", "message": "x"}], "tier": "shared", "zeroing": "always", "limits": limits}`,
		"unknown tier":                      head + `decision := {"allow": true, "reasons": [], "tier": "gold", "zeroing": "always", "limits": limits}`,
		"limits not numbers":                head + `decision := {"allow": true, "reasons": [], "tier": "shared", "zeroing": "always", "limits": {"max_context": "10"}}`,
		"allows a suspended tenant":         head + `decision := {"allow": true, "reasons": [], "tier": "dedicated", "zeroing": "always", "limits": limits}`,
		"allows a failed attestation":       head + `decision := {"allow": true, "reasons": [], "tier": "dedicated", "zeroing": "always", "limits": limits}`,
		"laxer isolation for personal data": head + `decision := {"allow": true, "reasons": [], "tier": "shared", "zeroing": "always", "limits": limits}`,
		"laxer zeroing than the record":     head + `decision := {"allow": true, "reasons": [], "tier": "dedicated", "zeroing": "never", "limits": limits}`,
		// Limits an allowed decision cannot carry: looser than the tenant's
		// quota, the served context or the request, or zero.
		"kv_pages above the quota":       allowWith(`"kv_pages": 257`),
		"max_concurrent above the quota": allowWith(`"max_concurrent": 5`),
		"tokens_per_minute above quota":  allowWith(`"tokens_per_minute": 60001`),
		"max_context above the quota":    allowWith(`"max_context": 2049`),
		"max_tokens above the request":   allowWith(`"max_tokens": 51`),
		"zero max_concurrent":            allowWith(`"max_concurrent": 0`),
		"zero tokens_per_minute":         allowWith(`"tokens_per_minute": 0`),
		"zero kv_pages":                  allowWith(`"kv_pages": 0`),
		"zero max_tokens":                allowWith(`"max_tokens": 0`),
	}
	edits := map[string]func(*Input){
		"allows a suspended tenant":         func(in *Input) { in.Tenant.Status = tenancy.StatusSuspended },
		"allows a failed attestation":       func(in *Input) { in.Attestation.OK = false },
		"laxer isolation for personal data": func(in *Input) { in.Tenant.Classification = tenancy.ClassPersonal },
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			d := &Decider{}
			setBundle(t, d, src)
			in := baseInput()
			if e := edits[name]; e != nil {
				e(&in)
			}
			dec, err := d.Decide(context.Background(), in)
			if dec.Allow || !errors.Is(err, ErrEvaluation) || cloison.ErrorCode(err) != cloison.CodeInternal {
				t.Fatalf("got allow=%v, %v; want deny with ErrEvaluation", dec.Allow, err)
			}
			if dec.ID == "" || dec.Revision == "" || dec.InputDigest == "" || len(dec.Reasons) != 1 {
				t.Fatalf("incomplete decision %+v", dec)
			}
			tier, z := strictest(in)
			if dec.Tier != tier || dec.Zeroing != z {
				t.Fatalf("isolation on failure: got %v/%v, want %v/%v", dec.Tier, dec.Zeroing, tier, z)
			}
		})
	}
	// A context that ends first denies, as canceled rather than as a bundle
	// failure.
	d := newDecider(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if dec, err := d.Decide(ctx, baseInput()); dec.Allow || !errors.Is(err, ErrCanceled) || cloison.ErrorCode(err) != cloison.CodeCanceled {
		t.Fatalf("canceled: got allow=%v, %v", dec.Allow, err)
	}
	// A zero Decider has no bundle and allows nothing.
	var zero Decider
	if dec, err := zero.Decide(context.Background(), baseInput()); dec.Allow || !errors.Is(err, ErrEvaluation) {
		t.Fatalf("zero Decider: got allow=%v, %v", dec.Allow, err)
	}
}

// A bundle may tighten every limit below the tenant's quotas; the decision
// carries what it chose.
func TestLimitsTightened(t *testing.T) {
	d := &Decider{}
	setBundle(t, d, allowWith(`"kv_pages": 8`))
	dec, err := d.Decide(context.Background(), baseInput())
	if err != nil || !dec.Allow {
		t.Fatalf("got allow=%v, %v; want allowed", dec.Allow, err)
	}
	want := Limits{MaxContext: 2048, MaxTokens: 50, KVPages: 8, MaxConcurrent: 4, TokensPerMinute: 60000}
	if dec.Limits != want {
		t.Fatalf("got %+v, want %+v", dec.Limits, want)
	}
}

func TestDecisionMetadata(t *testing.T) {
	d := newDecider(t)
	ctx := context.Background()
	in := baseInput()
	a, err := d.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.Decide(ctx, in)
	if a.ID == b.ID || !strings.HasPrefix(a.ID, "pd_") {
		t.Fatalf("decision ids %q, %q: want distinct pd_ ids", a.ID, b.ID)
	}
	if a.Revision != Digest(Shipped()) || d.Revision() != a.Revision || !strings.HasPrefix(a.Revision, "sha256:") {
		t.Fatalf("revision %q, want %q", a.Revision, Digest(Shipped()))
	}
	if a.InputDigest != b.InputDigest || len(a.InputDigest) != len("sha256:")+64 {
		t.Fatalf("input digest %q vs %q: want equal for equal inputs", a.InputDigest, b.InputDigest)
	}
	in.Request.MaxTokens++
	if c, _ := d.Decide(ctx, in); c.InputDigest == a.InputDigest {
		t.Fatal("input digest unchanged by a different request")
	}
	if a.Latency <= 0 || a.At.IsZero() {
		t.Fatalf("latency %v, at %v", a.Latency, a.At)
	}
	rec, err := json.Marshal(a.Record(baseInput()))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(rec, &m)
	for _, k := range []string{"decision_id", "tenant", "allow", "reasons", "tier", "zeroing", "bundle_revision", "input_digest", "latency_ns"} {
		if _, ok := m[k]; !ok {
			t.Errorf("record %s lacks %s", rec, k)
		}
	}
	if m["tier"] != "shared" || m["zeroing"] != "cross-tenant" {
		t.Errorf("record %s: want tier and zeroing by name", rec)
	}
	// Changing a file changes the revision; so does renaming one.
	src := Shipped()
	src["models.rego"] += "\n# comment\n"
	renamed := Shipped()
	renamed["zz.rego"] = renamed["models.rego"]
	delete(renamed, "models.rego")
	if Digest(src) == a.Revision || Digest(renamed) == a.Revision {
		t.Fatal("digest insensitive to content or names")
	}
}

// blockModel is the shipped bundle plus a rule that denies model "blocked".
func blockModel() map[string]string {
	src := Shipped()
	src["block.rego"] = `package cloison.policy

deny contains {"code": "permission_denied", "message": "model blocked by operator"} if input.request.model == "blocked"
`
	return src
}

func TestReload(t *testing.T) {
	ctx := context.Background()
	d := newDecider(t)
	old := d.Revision()
	in := baseInput()
	in.Request.Model = "blocked"
	in.Tenant.AllowedModels = append(in.Tenant.AllowedModels, "blocked")
	if dec, err := d.Decide(ctx, in); err != nil || !dec.Allow {
		t.Fatalf("before reload: got %v, %v", dec.Allow, err)
	}
	rev, err := d.Reload(ctx, blockModel())
	if err != nil {
		t.Fatal(err)
	}
	if rev == old || rev != d.Revision() || rev != Digest(blockModel()) {
		t.Fatalf("revision after reload: got %s (serving %s), old %s", rev, d.Revision(), old)
	}
	dec, err := d.Decide(ctx, in)
	if dec.Allow || !errors.Is(err, ErrDenied) || dec.Revision != rev {
		t.Fatalf("after reload: got allow=%v, %v, revision %s", dec.Allow, err, dec.Revision)
	}

	bad := map[string]map[string]string{
		"empty":                           {},
		"syntax error":                    {"a.rego": "package cloison.policy\ndecision := {"},
		"not a .rego name":                {"a.txt": "package cloison.policy"},
		"path in the name":                {"../a.rego": "package cloison.policy"},
		"no decision":                     {"a.rego": "package cloison.policy\nallow := true"},
		"network access":                  with(Shipped(), "net.rego", "package cloison.policy\nx := http.send({\"method\": \"get\", \"url\": \"http://x\"})"),
		"clock access":                    with(Shipped(), "clock.rego", "package cloison.policy\nx := time.now_ns()"),
		"failing rego test":               with(Shipped(), "x_test.rego", "package cloison.policy_test\ntest_fails if false"),
		"test file in the policy package": with(Shipped(), "y_test.rego", "package cloison.policy\ntest_ok if true"),
		"allows suspended":                {"a.rego": "package cloison.policy\n" + goodLimits + "\ndecision := {\"allow\": true, \"reasons\": [], \"tier\": \"dedicated\", \"zeroing\": \"always\", \"limits\": limits}"},
		"undefined on probes":             {"a.rego": "package cloison.policy\ndecision := {\"allow\": false} if input.nothing"},
		"conflict on probes":              with(Shipped(), "c.rego", "package cloison.policy\ntier := \"shared\" if input.tenant.id == \"probe\""),
		"attestation ignored":             without(Shipped(), "attestation.rego", "policy_test.rego"),
	}
	for name, src := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := d.Reload(ctx, src)
			if !errors.Is(err, ErrBundle) {
				t.Fatalf("got %v, want ErrBundle", err)
			}
			t.Log(err)
			if d.Revision() != rev {
				t.Fatalf("a refused bundle changed the revision to %s", d.Revision())
			}
			if dec, _ := d.Decide(ctx, in); dec.Allow || dec.Revision != rev {
				t.Fatalf("the old bundle no longer serves: allow=%v revision %s", dec.Allow, dec.Revision)
			}
		})
	}
}

func with(src map[string]string, name, body string) map[string]string {
	out := maps.Clone(src)
	out[name] = body
	return out
}

func without(src map[string]string, names ...string) map[string]string {
	out := maps.Clone(src)
	for _, n := range names {
		delete(out, n)
	}
	return out
}

// Reload swaps atomically under load: every decision is made by exactly
// one bundle, and its outcome is that bundle's.
func TestReloadConcurrent(t *testing.T) {
	ctx := context.Background()
	d := newDecider(t)
	plain := d.Revision()
	blocking := Digest(blockModel())
	in := baseInput()
	in.Request.Model = "blocked"
	in.Tenant.AllowedModels = []string{"blocked"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				dec, err := d.Decide(ctx, in)
				switch dec.Revision {
				case plain:
					if !dec.Allow || err != nil {
						t.Errorf("plain bundle denied: %v", err)
					}
				case blocking:
					if dec.Allow || !errors.Is(err, ErrDenied) {
						t.Errorf("blocking bundle allowed: %v", err)
					}
				default:
					t.Errorf("decision by unknown revision %s", dec.Revision)
				}
			}
		})
	}
	for i := range 6 {
		src := Shipped()
		if i%2 == 0 {
			src = blockModel()
		}
		if _, err := d.Reload(ctx, src); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

func BenchmarkDecide(b *testing.B) {
	d := newDecider(b)
	ctx := context.Background()
	in := baseInput()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := d.Decide(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecideParallel(b *testing.B) {
	d := newDecider(b)
	in := baseInput()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := d.Decide(context.Background(), in); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkPrepare(b *testing.B) {
	ctx := context.Background()
	src := Shipped()
	for b.Loop() {
		if _, err := prepare(ctx, src); err != nil {
			b.Fatal(err)
		}
	}
}

// Residency (where a tenant's data may be processed): the shipped bundle denies with permission_denied
// a request whose tenant's residency this node, or (on a decode node) every
// prefill node, is outside of; a bundle without the rule is refused at
// Reload (its probe), and were it serving, the Decider's floor would turn
// its allow into an evaluation failure: never a 200 outside the residency.
func TestResidency(t *testing.T) {
	ctx := context.Background()
	d := newDecider(t)
	qc := attest.Labels{Region: "ca-qc", Tier: "dedicated"}
	us := attest.Labels{Region: "us-east", Tier: "dedicated"}
	tests := []struct {
		name      string
		residency tenancy.Residency
		node      attest.Labels
		placement Placement
		allow     bool
	}{
		{"no residency, unlabelled node", tenancy.Residency{}, attest.Labels{}, Placement{}, true},
		{"region allowed", tenancy.Residency{Regions: []string{"ca-qc"}}, qc, Placement{}, true},
		{"node in another region", tenancy.Residency{Regions: []string{"ca-qc"}}, us, Placement{}, false},
		{"unlabelled node, region required", tenancy.Residency{Regions: []string{"ca-qc"}}, attest.Labels{}, Placement{}, false},
		{"tier required, node has another", tenancy.Residency{Tier: "dedicated"}, attest.Labels{Region: "ca-qc", Tier: "shared"}, Placement{}, false},
		{"split, one compliant prefill node", tenancy.Residency{Regions: []string{"ca-qc"}}, qc, Placement{Split: true, Prefill: []attest.Labels{us, qc}}, true},
		{"split, no compliant prefill node", tenancy.Residency{Regions: []string{"ca-qc"}}, qc, Placement{Split: true, Prefill: []attest.Labels{us}}, false},
		{"split, no prefill node at all", tenancy.Residency{Regions: []string{"ca-qc"}}, qc, Placement{Split: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := baseInput()
			in.Tenant.Residency, in.Attestation.Labels, in.Placement = tt.residency, tt.node, tt.placement
			in.Principal.TenantRecord = in.Tenant
			dec, err := d.Decide(ctx, in)
			if dec.Allow != tt.allow {
				t.Fatalf("got allow=%v (%v), want %v", dec.Allow, err, tt.allow)
			}
			if ok, _ := in.Complies(); ok != tt.allow {
				t.Fatalf("Complies = %v, want %v", ok, tt.allow)
			}
			if !tt.allow {
				var de *DeniedError
				if !errors.As(err, &de) || cloison.ErrorCode(err) != cloison.CodePermissionDenied {
					t.Fatalf("got %v, want a permission_denied DeniedError", err)
				}
				// A bundle that allowed it anyway fails the floor.
				allowed := Decision{Allow: true, Tier: in.Tenant.Tier, Zeroing: in.Tenant.Zeroing, Limits: dec.Limits}
				if err := allowed.enforceFloor(in); err == nil || !strings.Contains(err.Error(), "residency") {
					t.Fatalf("floor: got %v, want a residency refusal", err)
				}
			}
		})
	}
	src := Shipped()
	delete(src, "residency.rego")
	for name, body := range src {
		if strings.HasSuffix(name, "_test.rego") {
			src[name] = body[:strings.Index(body, "# Residency: tenants confined to node regions and tiers.")]
		}
	}
	if _, err := d.Reload(ctx, src); !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), "residency") {
		t.Fatalf("a bundle without residency.rego: got %v, want ErrBundle from the residency probe", err)
	}
}

// TestModelDigestVisible: a node serving several models attests each, and
// the policy sees which model's pool the request would use — its id and
// digest (input.attestation.model, model_digest) — so a bundle can pin a
// tenant to one build of a model.
func TestModelDigestVisible(t *testing.T) {
	ctx := context.Background()
	d := newDecider(t)
	pin := with(Shipped(), "pin.rego", `package cloison.policy

deny contains {"code": "permission_denied", "message": "acme is pinned to one build"} if {
	input.tenant.id == "acme"
	input.attestation.model_digest != "aa11"
}
`)
	if _, err := d.Reload(ctx, pin); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		digest string
		allow  bool
	}{{"aa11", true}, {"bb22", false}, {"", false}} {
		in := baseInput()
		in.Attestation.Model, in.Attestation.ModelDigest = "context-bag", tt.digest
		dec, err := d.Decide(ctx, in)
		if dec.Allow != tt.allow || (err == nil) != tt.allow {
			t.Errorf("digest %q: got allow=%v, %v; want allow=%v", tt.digest, dec.Allow, err, tt.allow)
		}
	}
}
