# Who may ask at all: an active tenant, a principal of that tenant, holding
# the infer scope.
package cloison.policy

tenant_active if input.tenant.status == "active"

deny contains {"code": "permission_denied", "message": "tenant is not active"} if not tenant_active

principal_of_tenant if {
	is_string(input.principal.tenant)
	input.principal.tenant == input.tenant.id
}

deny contains {"code": "permission_denied", "message": "the principal does not belong to this tenant"} if {
	not principal_of_tenant
}

may_infer if "infer" in input.principal.scopes

deny contains {"code": "permission_denied", "message": "the infer scope is required"} if not may_infer
