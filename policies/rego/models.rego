# A tenant uses only the models its record allows.
package cloison.policy

model_allowed if input.request.model in input.tenant.allowed_models

deny contains {"code": "permission_denied", "message": sprintf("model %q is not allowed for this tenant", [model_name])} if {
	not model_allowed
}

model_name := input.request.model if is_string(input.request.model)
else := "(none)"
