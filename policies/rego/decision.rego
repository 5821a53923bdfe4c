# The decision for one inference request. Every other file of the bundle
# adds reasons to `deny`; the request is allowed only when none applies.
# Absent or ill-typed input never allows: each rule that reads input is
# written so that undefined means deny (`not ok` rather than `x != y`),
# and an undefined `decision` is a deny in the Go Decider.
package cloison.policy

default allow := false

allow if count(reasons) == 0

reasons := sort(deny)

decision := {
	"allow": allow,
	"reasons": reasons,
	"tier": tier,
	"zeroing": zeroing,
	"limits": limits,
}

limits := {
	"max_context": max_context,
	"max_tokens": max_tokens,
	"kv_pages": input.tenant.quotas.kv_pages,
	"max_concurrent": input.tenant.quotas.max_concurrent,
	"tokens_per_minute": input.tenant.quotas.tokens_per_minute,
}
