# One request's prompt plus completion fits the tenant's maximum context,
# which is never more than the context the engine attested it serves.
package cloison.policy

served_context := input.attestation.served_context

max_context := min({input.tenant.quotas.max_context, served_context}) if input.tenant.quotas.max_context > 0
else := served_context

valid_request if {
	is_number(input.request.prompt_tokens)
	is_number(input.request.max_tokens)
	input.request.prompt_tokens >= 1
	input.request.max_tokens >= 1
}

deny contains {"code": "invalid_request_error", "message": "prompt_tokens and max_tokens must be positive numbers"} if {
	not valid_request
}

request_tokens := input.request.prompt_tokens + input.request.max_tokens

fits if request_tokens <= max_context

deny contains {
	"code": "context_length_exceeded",
	"message": sprintf("this request needs %d tokens (%d in the prompt, %d to generate); the maximum context is %d tokens", [
		request_tokens, input.request.prompt_tokens, input.request.max_tokens, max_context,
	]),
} if {
	valid_request
	not fits
}

# What the engine may generate: the request's max_tokens, cut to the room
# the context leaves (0 when the request is denied as invalid).
max_tokens := min({input.request.max_tokens, max_context - input.request.prompt_tokens}) if valid_request
else := 0
