# Residency (a tenant's contract or the law may confine its data to a
# region or a kind of machine): a tenant's data is processed only on nodes whose
# attested labels its residency allows — this node (input.node) and, on a
# decode node (input.node.split), at least one prefill node it may ask now
# (input.node.prefill; the decode node then sends the prompt only to such a
# node). An empty region list or tier means "any". A missing residency or
# node label never allows: undefined means deny.
package cloison.policy

region_ok(labels) if count(input.tenant.residency.regions) == 0

region_ok(labels) if labels.region in input.tenant.residency.regions

tier_ok(labels) if input.tenant.residency.tier == ""

tier_ok(labels) if labels.tier == input.tenant.residency.tier

serves(labels) if {
	region_ok(labels)
	tier_ok(labels)
}

node_complies if serves(input.node)

prefill_complies if input.node.split == false

prefill_complies if {
	input.node.split == true
	some p in input.node.prefill
	serves(p)
}

deny contains {
	"code": "permission_denied",
	"message": sprintf("this node (region %q, tier %q) is outside this tenant's residency", [node_label("region"), node_label("tier")]),
} if not node_complies

deny contains {
	"code": "permission_denied",
	"message": "no prefill node in the regions and tier this tenant's residency allows",
} if {
	node_complies
	not prefill_complies
}

node_label(k) := input.node[k] if is_string(input.node[k])
else := "(none)"
