package policies

import (
	"context"
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// TestDecisionProperties draws arbitrary inputs and checks what any
// decision of the shipped bundle must satisfy: an allowed request comes
// from an active tenant's own principal holding infer, under a passing
// attestation, for an allowed model, within the tenant's and the served
// context, isolated no laxer than its record and dedicated/always for
// sensitive data; a denial always says why; nothing fails to evaluate.
func TestDecisionProperties(t *testing.T) {
	d := newDecider(t)
	ctx := context.Background()
	allowed, total := 0, 0
	classes := []tenancy.Classification{tenancy.ClassPublic, tenancy.ClassInternal, tenancy.ClassConfidential, tenancy.ClassPersonal, "secret"}
	// Five rounds of rapid's default 100 checks: about 500 decisions.
	for range 5 {
		rapid.Check(t, func(rt *rapid.T) {
			in := baseInput()
			in.Tenant.Status = rapid.SampledFrom([]tenancy.Status{tenancy.StatusActive, tenancy.StatusActive, tenancy.StatusActive, tenancy.StatusSuspended, ""}).Draw(rt, "status")
			in.Tenant.Classification = rapid.SampledFrom(classes).Draw(rt, "class")
			in.Tenant.Tier = rapid.SampledFrom([]isolation.Tier{isolation.TierShared, isolation.TierDedicated}).Draw(rt, "tier")
			in.Tenant.Zeroing = rapid.SampledFrom([]isolation.Zeroing{isolation.ZeroNever, isolation.ZeroCrossTenant, isolation.ZeroAlways}).Draw(rt, "zeroing")
			in.Tenant.AllowedModels = rapid.SliceOfDistinct(rapid.SampledFrom([]string{"a", "b"}), rapid.ID[string]).Draw(rt, "models")
			if rapid.IntRange(0, 3).Draw(rt, "allow context-bag") < 3 {
				in.Tenant.AllowedModels = append(in.Tenant.AllowedModels, "context-bag")
			}
			in.Tenant.Quotas.MaxContext = rapid.SampledFrom([]int{0, 0, 16, 1024, 4096, 8192}).Draw(rt, "tenant max context")
			in.Principal.Tenant = rapid.SampledFrom([]cloison.TenantID{"acme", "acme", "acme", "other"}).Draw(rt, "principal tenant")
			in.Principal.Scopes = rapid.SliceOfDistinct(rapid.SampledFrom(tenancy.Scopes), rapid.ID[tenancy.Scope]).Draw(rt, "scopes")
			if rapid.IntRange(0, 3).Draw(rt, "add infer") < 3 && !slices.Contains(in.Principal.Scopes, tenancy.ScopeInfer) {
				in.Principal.Scopes = append(in.Principal.Scopes, tenancy.ScopeInfer)
			}
			in.Request = Request{
				Model:        rapid.SampledFrom([]string{"a", "b", "context-bag", "context-bag", "context-bag", ""}).Draw(rt, "model"),
				PromptTokens: tokens(rt, "prompt"),
				MaxTokens:    tokens(rt, "max tokens"),
			}
			in.Attestation.OK = rapid.IntRange(0, 3).Draw(rt, "attested") < 3
			in.Attestation.ServedContext = rapid.SampledFrom([]int{1, 64, 2048, 4096, 8192}).Draw(rt, "served context")

			dec, err := d.Decide(ctx, in)
			total++
			if dec.Allow {
				allowed++
			}
			if errors.Is(err, ErrEvaluation) {
				rt.Fatalf("evaluation failed: %v", err)
			}
			if !dec.Allow {
				if len(dec.Reasons) == 0 || !errors.Is(err, ErrDenied) {
					rt.Fatalf("denial without reasons: %+v, %v", dec, err)
				}
				return
			}
			maxCtx := in.Attestation.ServedContext
			if in.Tenant.Quotas.MaxContext > 0 {
				maxCtx = min(maxCtx, in.Tenant.Quotas.MaxContext)
			}
			switch {
			case err != nil:
				rt.Fatalf("allowed with error %v", err)
			case in.Tenant.Status != tenancy.StatusActive:
				rt.Fatalf("allowed a %q tenant", in.Tenant.Status)
			case !in.Attestation.OK:
				rt.Fatal("allowed under a failed attestation")
			case in.Principal.Tenant != in.Tenant.ID:
				rt.Fatal("allowed another tenant's principal")
			case !slices.Contains(in.Principal.Scopes, tenancy.ScopeInfer):
				rt.Fatal("allowed without the infer scope")
			case !slices.Contains(in.Tenant.AllowedModels, in.Request.Model):
				rt.Fatalf("allowed model %q outside %v", in.Request.Model, in.Tenant.AllowedModels)
			case in.Request.PromptTokens < 1 || in.Request.MaxTokens < 1:
				rt.Fatal("allowed non-positive token counts")
			case in.Request.PromptTokens+in.Request.MaxTokens > maxCtx:
				rt.Fatalf("allowed %d+%d tokens over a context of %d", in.Request.PromptTokens, in.Request.MaxTokens, maxCtx)
			case dec.Limits.MaxContext != maxCtx || dec.Limits.MaxTokens != in.Request.MaxTokens:
				rt.Fatalf("limits %+v, want max context %d, max tokens %d", dec.Limits, maxCtx, in.Request.MaxTokens)
			case dec.Tier < in.Tenant.Tier || dec.Zeroing < in.Tenant.Zeroing:
				rt.Fatalf("isolation %v/%v laxer than the record's %v/%v", dec.Tier, dec.Zeroing, in.Tenant.Tier, in.Tenant.Zeroing)
			case in.Tenant.Classification.Sensitive() && (dec.Tier != isolation.TierDedicated || dec.Zeroing != isolation.ZeroAlways):
				rt.Fatalf("%s data on %v/%v", in.Tenant.Classification, dec.Tier, dec.Zeroing)
			case !slices.Contains(classes[:4], in.Tenant.Classification):
				rt.Fatalf("allowed unknown classification %q", in.Tenant.Classification)
			}
		})
	}
	// The draws are weighted so that the allowed path is exercised too.
	if allowed == 0 || allowed == total {
		t.Fatalf("%d of %d decisions allowed: the draws exercise one side only", allowed, total)
	}
	t.Logf("%d of %d decisions allowed", allowed, total)
}

// tokens draws a positive count three times in four, else 0, -1 or -2.
func tokens(rt *rapid.T, label string) int {
	if rapid.IntRange(0, 3).Draw(rt, label+" valid") < 3 {
		return rapid.IntRange(1, 2100).Draw(rt, label)
	}
	return rapid.IntRange(-2, 0).Draw(rt, label)
}
