# Unit tests of the shipped bundle, run from `go test` by OPA's tester.
package cloison.policy_test

import data.cloison.policy

base := {
	"principal": {"subject": "svc", "tenant": "acme", "scopes": ["infer"], "issuer": "https://cloison.local"},
	"tenant": {
		"id": "acme",
		"status": "active",
		"tier": "shared",
		"zeroing": "cross-tenant",
		"classification": "internal",
		"allowed_models": ["context-bag", "qwen2"],
		"residency": {"regions": [], "tier": ""},
		"quotas": {"max_concurrent": 4, "kv_pages": 256, "tokens_per_minute": 60000, "max_context": 2048},
	},
	"request": {"model": "context-bag", "prompt_tokens": 100, "max_tokens": 50},
	"attestation": {"model_context": 4096, "served_context": 4096, "pool_tokens": 8192, "ok": true},
	"node": {"region": "ca-qc", "tier": "shared", "split": false, "prefill": []},
}

with_tenant(field, value) := object.union(base, {"tenant": object.union(base.tenant, {field: value})})

with_request(field, value) := object.union(base, {"request": object.union(base.request, {field: value})})

# replace sets obj[key] to value (object.union would merge nested objects).
replace(obj, key, value) := object.union(object.remove(obj, {key}), {key: value})

codes(d) := {r.code | some r in d.reasons}

test_allows_a_well_formed_request if {
	d := policy.decision with input as base
	d.allow == true
	d.reasons == []
	d.tier == "shared"
	d.zeroing == "cross-tenant"
	d.limits == {"max_context": 2048, "max_tokens": 50, "kv_pages": 256, "max_concurrent": 4, "tokens_per_minute": 60000}
}

test_personal_data_gets_dedicated_pages_zeroed_always if {
	d := policy.decision with input as with_tenant("classification", "personal")
	d.tier == "dedicated"
	d.zeroing == "always"
	d.allow == true
}

test_confidential_data_gets_dedicated_pages_zeroed_always if {
	d := policy.decision with input as with_tenant("classification", "confidential")
	d.tier == "dedicated"
	d.zeroing == "always"
}

test_public_data_keeps_the_tenant_isolation if {
	inp := object.union(base, {"tenant": object.union(base.tenant, {"classification": "public", "zeroing": "never"})})
	d := policy.decision with input as inp
	d.tier == "shared"
	d.zeroing == "never"
}

test_unknown_classification_denied if {
	d := policy.decision with input as with_tenant("classification", "secret")
	not d.allow
	"permission_denied" in codes(d)
}

test_model_not_in_allow_list_denied if {
	d := policy.decision with input as with_request("model", "gpt-5")
	not d.allow
	some r in d.reasons
	r.message == "model \"gpt-5\" is not allowed for this tenant"
}

test_empty_allow_list_denies_every_model if {
	d := policy.decision with input as with_tenant("allowed_models", [])
	not d.allow
}

test_missing_model_denied if {
	d := policy.decision with input as replace(base, "request", {"prompt_tokens": 1, "max_tokens": 1})
	not d.allow
}

test_tenant_max_context if {
	ok := policy.decision with input as object.union(base, {"request": {"model": "context-bag", "prompt_tokens": 2000, "max_tokens": 48}})
	ok.allow
	ok.limits.max_tokens == 48
	over := policy.decision with input as object.union(base, {"request": {"model": "context-bag", "prompt_tokens": 2000, "max_tokens": 49}})
	not over.allow
	codes(over) == {"context_length_exceeded"}
}

test_max_context_never_exceeds_the_served_context if {
	d := policy.decision with input as with_tenant("quotas", object.union(base.tenant.quotas, {"max_context": 100000}))
	d.limits.max_context == 4096
	unset := policy.decision with input as with_tenant("quotas", object.union(base.tenant.quotas, {"max_context": 0}))
	unset.limits.max_context == 4096
}

test_invalid_token_counts_denied if {
	every req in [
		{"model": "context-bag", "prompt_tokens": 0, "max_tokens": 1},
		{"model": "context-bag", "prompt_tokens": 1, "max_tokens": 0},
		{"model": "context-bag", "prompt_tokens": -5, "max_tokens": 10},
		{"model": "context-bag", "prompt_tokens": "10", "max_tokens": 10},
		{"model": "context-bag"},
	] {
		d := policy.decision with input as replace(base, "request", req)
		not d.allow
		"invalid_request_error" in codes(d)
	}
}

test_failed_attestation_refuses_service if {
	inp := object.union(base, {"attestation": object.union(base.attestation, {"ok": false, "reason": "pool holds 1024 tokens"})})
	d := policy.decision with input as inp
	not d.allow
	some r in d.reasons
	r.code == "unavailable"
	r.message == "capacity attestation failed: pool holds 1024 tokens"
}

test_attestation_ok_must_be_true_not_truthy if {
	d := policy.decision with input as object.union(base, {"attestation": object.union(base.attestation, {"ok": "true"})})
	not d.allow
}

test_suspended_tenant_denied if {
	d := policy.decision with input as with_tenant("status", "suspended")
	not d.allow
	"permission_denied" in codes(d)
}

test_missing_status_denied if {
	d := policy.decision with input as replace(base, "tenant", object.remove(base.tenant, {"status"}))
	not d.allow
}

test_principal_of_another_tenant_denied if {
	d := policy.decision with input as object.union(base, {"principal": object.union(base.principal, {"tenant": "other"})})
	not d.allow
}

test_infer_scope_required if {
	d := policy.decision with input as object.union(base, {"principal": object.union(base.principal, {"scopes": ["compliance:read"]})})
	not d.allow
}

test_reasons_accumulate if {
	inp := replace(with_tenant("status", "suspended"), "request", {"model": "nope", "prompt_tokens": 1, "max_tokens": 1})
	d := policy.decision with input as inp
	count(d.reasons) == 2
}

test_empty_input_never_allows if {
	not policy.allow with input as {}
}

# Residency: tenants confined to node regions and tiers.

with_residency(regions, tier) := with_tenant("residency", {"regions": regions, "tier": tier})

with_node(doc, node) := replace(doc, "node", node)

test_residency_allows_a_node_in_an_allowed_region if {
	d := policy.decision with input as with_residency(["ca-on", "ca-qc"], "")
	d.allow == true
}

test_residency_denies_a_node_in_another_region if {
	d := policy.decision with input as with_residency(["eu-fr"], "")
	d.allow == false
	codes(d) == {"permission_denied"}
}

test_residency_denies_an_unlabelled_node if {
	d := policy.decision with input as with_node(with_residency(["ca-qc"], ""), {"region": "", "tier": "", "split": false, "prefill": []})
	d.allow == false
}

test_residency_denies_a_node_of_another_tier if {
	d := policy.decision with input as with_residency([], "dedicated")
	d.allow == false
	codes(d) == {"permission_denied"}
}

test_residency_on_a_decode_node_needs_one_compliant_prefill_node if {
	split := {"region": "ca-qc", "tier": "shared", "split": true, "prefill": [{"region": "us-east", "tier": "shared"}]}
	d := policy.decision with input as with_node(with_residency(["ca-qc"], ""), split)
	d.allow == false
	ok := object.union(split, {"prefill": [{"region": "us-east", "tier": "shared"}, {"region": "ca-qc", "tier": "shared"}]})
	d2 := policy.decision with input as with_node(with_residency(["ca-qc"], ""), ok)
	d2.allow == true
}

test_residency_missing_denies if {
	d := policy.decision with input as replace(base, "tenant", object.remove(base.tenant, {"residency"}))
	d.allow == false
}
