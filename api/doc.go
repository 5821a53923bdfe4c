// Package api serves Cloison over gRPC and an OpenAI-compatible HTTP API.
//
// Files: server.go (routes, the one inference path generate), errors.go (the
// one error → gRPC/HTTP table), fields.go (what every request field does:
// implemented, ignored because it cannot change the output, or refused with
// 400 naming it — an unknown field is refused too), openai.go and
// respond.go (completions and chat completions), tools.go (function tools),
// openai_extras.go (content parts, /v1/models/{id}, /tokenize), respapi.go
// (the Responses API), responses.go (verifying, reporting and replaying
// what was served), admin.go, compliance.go, grpc*.go.
//
// # The Responses API
//
// POST /v1/responses is the chat completion path under other wire shapes:
// DecodeResponses turns the request into the ChatRequest it amounts to and
// chatInference renders, constrains and tools it exactly as
// /v1/chat/completions does, so the same template, tool-call parser and
// grammar serve both (TestResponsesAPI checks the prompt tokens and greedy
// text are the chat completion's).
//
//   - input: a string (one user message) or a list of items: messages
//     (role user, system, developer — a system message for the template —
//     or assistant; content a string or input_text / output_text parts),
//     function_call and function_call_output items (an assistant turn with
//     its calls, a tool message). Image, file and audio parts, item
//     references and reasoning items are refused with 400.
//   - instructions: a leading system message (not carried over by
//     previous_response_id, as OpenAI does).
//   - tools: function tools {type, name, description, parameters, strict};
//     hosted tools (web_search, file_search, …) are refused. tool_choice
//     none / auto / required / {type: function, name}, as chat.
//   - text.format: text, json_object, json_schema (always enforced by
//     constrained decoding); text.verbosity is refused.
//   - max_output_tokens, temperature, top_p, stream; parallel_tool_calls.
//   - Ignored (no effect on the output): user, safety_identifier,
//     metadata (echoed), service_tier, prompt_cache_key. Refused unless
//     neutral: include ([]), reasoning ({}), background (false), truncation
//     ("disabled"), top_logprobs (0); refused: conversation, prompt,
//     max_tool_calls, stream_options.
//
// The response object carries output items of type message (one
// output_text part) and function_call (call_id "call_…", arguments),
// usage {input_tokens, output_tokens, total_tokens, details}, status
// completed, or incomplete with incomplete_details.reason
// "max_output_tokens". A stream is "event: TYPE / data: JSON" events with
// increasing sequence_number: response.created, response.in_progress, then
// per item output_item.added, content_part.added, output_text.delta…,
// output_text.done, content_part.done, output_item.done (function calls:
// output_item.added, function_call_arguments.delta and .done,
// output_item.done), then response.completed or response.incomplete only
// after request.completed is in the ledger; a failure ends it with an error
// event instead.
//
// store defaults to false here (OpenAI's default is true): Cloison keeps no
// text unless asked. With store: true the response and its conversation are
// sealed (AES-256-GCM, audit.StoredResponseKey of the tenant, associated
// data binding tenant and id) into stored_responses in the transaction that
// ledgers response.stored (id, request, SHA-256 of the sealed blob, size);
// GET /v1/responses/{id} opens it, DELETE deletes it with response.deleted
// in one transaction, and previous_response_id continues its conversation.
// All three name the caller's tenant: another tenant's id is 404 like an
// unknown or deleted one. Without a KEK, store: true is 503 (ErrStoreOff),
// never silently not stored; a store that fails fails the response (503,
// or an error event in place of response.completed). Not implemented:
// GET /v1/responses/{id}/input_items, POST /v1/responses/{id}/cancel (JSON
// 404), the Responses API over gRPC.
package api
