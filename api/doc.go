// Package api is Cloison's transport: it serves the application of package
// service over an OpenAI-compatible HTTP API (JSON and SSE) and gRPC, and
// holds nothing of the application itself.
//
// The request path — authentication, the policy decision, admission, the
// ledger rows before and after service, the engine's sequences, refusal
// counts and incidents, tokenizer requests and their metering — is
// service.Requests; the prompt (chat template rendering, tokenization, the
// grammar of a forced or strict tool call) and the tool calls read back
// from the output are service.Model, service.ReasoningStream (a
// reasoning model's reasoning_content and Responses reasoning items,
// respond.go, respapi.go) and service.ToolStream; verify,
// report, replay and stored responses (with the Responses API's
// conversation state) are service.Responses; the admin and compliance
// operations are service.Admin and service.Compliance. api decodes a
// request into their arguments, streams the tokens it is handed
// (service.Sink), encodes the result or the error, and hears what happened
// as the service's Observer (metrics and the access log).
//
// What api keeps, and what it guarantees:
//   - Routes and codecs: one route table per transport (server.go,
//     grpc.go), the same operation behind an HTTP route and its gRPC
//     method, so the two differ only in how messages are encoded.
//   - Field tables (fields.go): every request field is implemented,
//     ignored because it cannot change the output, or refused with 400
//     naming it; an unknown field is refused too. docs/api.md's table is
//     generated from them.
//   - Connection limits: idle, header, body and write deadlines per
//     connection and per-tenant connection caps (transport.go), caps on
//     generations in flight, per tenant and in total (Config.MaxStreams),
//     and on compliance streams (streams.go), so that no client and no
//     tenant can hold the node.
//   - One error table (errors.go): every error code maps to one gRPC code,
//     one HTTP status and one OpenAI error type; only public messages reach
//     the wire.
//   - Metrics and the access log (metrics.go, accesslog.go, observer.go),
//     with a bounded tenant label.
//
// Files: server.go (routes, generate: the hand-over to the service),
// deps.go (what the server needs of the engine and the ledger),
// errors.go, fields.go, transport.go, streams.go, openai.go and respond.go
// (completions and chat completions), choices.go, tools.go (function
// tools on the wire: decoding tools and tool_choice, writing calls),
// openai_extras.go (content parts, /v1/models/{id}, the /tokenize and
// /detokenize codecs),
// respapi.go and respitems.go (the Responses API), responses.go and
// responses_grpc.go (verifying, reporting and replaying what was served),
// models.go (several models per node: the request routed to the view of
// the server its model field names, the admin's model load and unload),
// adapters.go (tenants' LoRA adapters: "<model>:<adapter>" routed to the
// model's view, listed only to their tenant; the admin's registration; a
// tenant's own upload, POST /v1/adapters with adapters:write),
// admin.go, compliance.go, drafts.go and register_grpc.go, tlog.go (the
// transparency log's routes), servedlog.go (the same global log as a C2SP
// tlog-tiles log at /log/, without a token), ops.go (the service operations this server
// calls), grpc.go and grpc_services.go, incident.go and refusals.go (the
// node's handles on the service's incident writes and refusal counts),
// metrics.go and noticedues.go, accesslog.go, observer.go, trace.go,
// timing.go (Config.ServerTiming: a Server-Timing trailer of each HTTP
// request's time per span, for benchmarks).
//
// # Choices, echo and suffix
//
// On HTTP completions and chat (gRPC Generate takes n too; echo and suffix
// are HTTP only):
//   - n > 1 (choices.go): one request runs n sequences of the engine, each
//     its own stream, grammar matcher and tool-call parser. Choice 0 runs
//     with the request's seed, choice i > 0 with service's choiceSeed(seed, i)
//     (SplitMix64 of seed + i·0x9e3779b97f4a7c15): the same request with a
//     seed gives the same n choices. All n count against the request's KV
//     pages and the tenant's quota before any starts; n above Config.MaxN
//     (--max-n, default 8) is refused (400). With the prefix cache on,
//     choices 1..n-1 start once choice 0 computed the prompt and share its
//     full pages in the tenant's own namespace (never another tenant's).
//     Usage counts the prompt once and sums the completions; streamed
//     chunks carry the choice index, each choice ends with its own
//     finish_reason, usage comes once at the end. request.completed holds
//     every choice's seed and keyed digests (audit.Served.Choices): verify
//     takes a "choice" index; replay re-runs every choice alone with its
//     recorded seed (confirmed when any differs).
//   - echo (completions): the prompt text precedes the completion in
//     choices[].text (streamed: a first chunk of its own per choice); token
//     ids are echoed as their text. With logprobs N the prompt is scored as
//     OpenAI's legacy completions do (lm-eval-harness's loglikelihood):
//     logprobs.tokens, token_logprobs, top_logprobs and text_offset start
//     with the prompt's tokens — the first with a null logprob and null
//     alternatives, each other the raw log-softmax of the model's logits
//     after the tokens before it (no temperature, penalty or bias) with its
//     N best alternatives — then the completion's; text_offset counts Unicode
//     code points in choices[].text (control tokens add none). The engine
//     scores it (engine.GenerateRequest.ScorePrompt): the prompt is computed
//     in full, never from the prefix cache, one chunk's logits at a time;
//     each of n choices scores its own prompt (no prefix sharing between
//     them). Streamed, the echo chunk comes once the prompt is scored and
//     carries its logprobs. max_tokens 0 is accepted with echo only: the
//     prompt alone (scored with logprobs), finish_reason length, 0
//     completion tokens; the policy decides it as one token (it knows no
//     request that generates nothing). Not on a decode node of a split
//     deployment (prefill nodes return KV, no logits: 400 unsupported).
//     The ledger records counts and digests as for any request, no score.
//   - suffix (completions): only for a model with fill-in-the-middle
//     tokens (tokenizer.HasFIM); the prompt is built as llama.cpp's infill,
//     [BOS] FIM_PRE prefix FIM_SUF suffix FIM_MID, the user's text never
//     parsed for control tokens. Otherwise, or with echo or a prompt of
//     token ids, 400 naming suffix. A suffix request's prompt digest is
//     over those infill ids: verify and replay it with the ids (/tokenize
//     does not build them).
//   - vLLM's dialect (dialect.go, fields.go; docs/api.md's dialect table):
//     ignore_eos, min_tokens, stop_token_ids, include_stop_str_in_output
//     and skip_special_tokens reach the engine (engine.GenerateRequest);
//     stream_options.continuous_usage_stats puts the usage so far in every
//     chunk; structured_outputs / guided_* (and SGLang's regex and ebnf)
//     compile to a grammar (a choice of literals, the schema path, or a
//     regex, GBNF or Lark grammar: textgrammar.go, grammar.FromText), and
//     disable_any_whitespace picks the JSON whitespace policy (compact by
//     default under a strict json_schema); chat_template_kwargs
//     (booleans, numbers, null), reasoning_effort, add_generation_prompt and
//     continue_final_message reach the template (chat.Options);
//     truncate_prompt_tokens keeps the prompt's last tokens;
//     return_tokens_as_token_ids names logprob tokens token_id:<id>. A
//     request without max_tokens gets the rest of the tenant's context
//     (Config.DefaultMaxTokens caps it; service.Request.DefaultMax).
//     cache_salt narrows the tenant's prefix cache to the requests of the
//     same salt (never across tenants: isolation.Pool.AllocatePrefixSalted);
//     prompt_logprobs scores the prompt at prefill (as echo with logprobs)
//     and answers in vLLM's shape. A list of prompts on /v1/completions is
//     a batch (serveBatch: each prompt a request of its own, the choices
//     indexed prompt-major, the usage summed). priority and chat_template
//     are refused with their reasons. GET /health answers 200 or
//     503 with no body; an unknown model is model_not_found.
//
// # The Responses API
//
// POST /v1/responses is the chat completion path under other wire shapes:
// DecodeResponses turns the request into the ChatRequest it amounts to and
// chatInference (service.Model.PrepareChat) renders, constrains and tools
// it exactly as /v1/chat/completions does, so the same template, tool-call parser and
// grammar serve both (TestResponsesAPI checks the prompt tokens and greedy
// text are the chat completion's).
//
//   - input: a string (one user message) or a list of items: messages
//     (role user, system, developer — a system message for the template —
//     or assistant; content a string or input_text / output_text parts),
//     function_call and function_call_output items (an assistant turn with
//     its calls, a tool message; custom_tool_call and
//     custom_tool_call_output likewise), reasoning items (reasoning_text parts:
//     the <think> block of the assistant turn after them, which the
//     template keeps or drops; a summary or encrypted_content is refused).
//     Image, file and audio parts and item references are refused with
//     400.
//   - instructions: a leading system message (not carried over by
//     previous_response_id, as OpenAI does).
//   - tools: function tools {type, name, description, parameters, strict};
//     hosted tools (web_search, file_search, …) are refused. tool_choice
//     none / auto / required / {type: function, name}, as chat (strict
//     under auto: free text, but each call the model opens is constrained
//     to its schema, see service/tools.go). Custom tools {type: custom,
//     name, description, format: text or {type: grammar, syntax: lark or
//     regex, definition}} are served when tool_choice forces one ({type:
//     custom, name}, or required with that tool alone): the output is the
//     tool's input under its grammar, one custom_tool_call item (streamed
//     as custom_tool_call_input deltas); custom_tool_call and
//     custom_tool_call_output input items are taken; a custom tool under
//     auto or beside function tools is refused (respcustom.go).
//   - text.format: text, json_object, json_schema (always enforced by
//     constrained decoding); text.verbosity is refused.
//   - max_output_tokens, temperature, top_p, stream; parallel_tool_calls.
//   - include: ["message.output_text.logprobs"] gives the output_text part
//     logprobs [{token, logprob, bytes, top_logprobs: [{token, logprob,
//     bytes}]}] — the chat completion's logprobs (under the sampling
//     distribution), top_logprobs (0–20) alternatives each; top_logprobs
//     > 0 alone asks for them too, as chat's does. Streamed, each
//     output_text.delta carries the logprobs of the tokens whose text it
//     releases (held-back text's come with it), output_text.done all of
//     them; a function call's tokens have none. Any other include value
//     is refused (400 naming it).
//   - Ignored (no effect on the output): user, safety_identifier,
//     metadata (echoed), service_tier, prompt_cache_key. Refused unless
//     neutral: reasoning ({}), background (false), truncation
//     ("disabled"); refused: conversation, prompt, max_tool_calls,
//     stream_options.
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
// GET /v1/responses/{id}/input_items (respitems.go) lists the conversation
// the stored response read — the previous responses' turns, then its own
// input, never instructions or its own output — as message (input_text;
// output_text for the assistant's; a developer message reads as system),
// function_call and function_call_output items with ids stable per place,
// newest first unless order=asc, limit 1–100 (default 20), after an item
// id; any other query parameter is 400. All four name the caller's tenant:
// another tenant's id is 404 like an unknown, deleted or store: false one. Without a KEK, store: true is 503 (ErrStoreOff),
// never silently not stored; a store that fails fails the response (503,
// or an error event in place of response.completed). Not implemented:
// POST /v1/responses/{id}/cancel (JSON 404), the Responses API over gRPC.
//
// # Errors
//
// One table (errors.go) maps every error code to one gRPC code, one HTTP
// status and an OpenAI-shaped JSON body ({"error": {"message", "type",
// "param", "code"}}) carrying the public message only; causes are logged with
// the X-Request-Id every error answer carries, and internal errors are
// answered with "Internal error.". A database that refuses or drops
// connections is 503 unavailable with Retry-After, never 500.
//
// # gRPC
//
// cloisond serves gRPC on --grpc-addr (default 127.0.0.1:9090; empty disables
// it) beside HTTP, with the same request path: Generate runs the very code of
// /v1/completions (service.Requests.Generate: policy decision ledgered first, reject
// before allocate, request.completed ledgered before the final message), and
// admin and compliance methods call the same functions as their HTTP routes.
// Protos: api/proto/cloison/{inference,admin,compliance}/v1 (generated code
// committed; make generate regenerates it with Debian's protoc 3.21.12 and
// pinned Go plugins).
//
//	service                                methods                                                    scopes
//	cloison.inference.v1.InferenceService  Generate, Tokenize, ListModels, GetAttestation             infer (GetAttestation: any token)
//	cloison.admin.v1.AdminService          ListTenants, GetTenant, CreateTenant, SuspendTenant,       admin
//	                                       ActivateTenant, UpdateTenant, ListClients, CreateClient,
//	                                       RevokeClient, RevokeToken, ListKeys, RotateKeys, RetireKey,
//	                                       PoolStatus, ReloadPolicies, ReloadPoliciesStream,
//	                                       GetRegisterSettings, SetRegisterSettings,
//	                                       ListModels, LoadModel, UnloadModel
//	cloison.compliance.v1.ComplianceService ListIncidents, GetIncident, LedgerRange, GetIncidentDraft compliance:read, own tenant only (redacted as over HTTP) unless admin
//	                                       OpenIncident, UpdateIncident, AddNotice                    compliance:write + admin
//	                                       VerifyLedger, Export                                       compliance:read + admin
//	grpc.health.v1.Health, server reflection                                                          none
//
// Generate is server-streaming: token chunks, then one Final with finish
// reason and usage; logit_bias and response_format as over HTTP, the schema as
// JSON text (and type structural_tag, its object as JSON text in
// structural_tag); tools on chat prompts. LedgerRange streams rows with the exact
// hashed payload bytes: the operator's by global seq with hashes, a
// tenant's its tenant log by position (the leaves its tenant proofs cover;
// service.Compliance.ScanTenantLog); Export streams a signed export (verify with
// cloisonctl audit verify-export).
//
// The token goes in the authorization metadata (Bearer <jwt>). Every response
// carries x-request-id header metadata (the id the ledger records; a client's
// own id is only logged); Generate also carries x-cloison-decision-id, and on
// success the cloison-receipt trailer (ReceiptKey: request.completed's
// audit.Receipt, as the HTTP routes send it in the Cloison-Receipt header,
// or a stream's trailer and final SSE comment: ReceiptHeader). Errors
// use the same table as HTTP: the status message is the public message, the
// code travels as a google.rpc.ErrorInfo detail (reason = the code, domain =
// cloison.dev), internal errors read "Internal error.", and quota refusals and
// UNAVAILABLE carry a google.rpc.RetryInfo detail and a retry-after trailer. A
// failed generation ends with an error status and no Final. Health is SERVING
// only when the capacity attestation passed and the ledger answers (as
// /readyz). Register documents (incident files, versions, notices) travel as
// the HTTP API's JSON. Interceptors: request ids, authentication, per-method
// scopes (a method missing from the table is refused), panics → INTERNAL.
//
//	grpcurl -plaintext 127.0.0.1:9090 list
//	grpcurl -plaintext 127.0.0.1:9090 grpc.health.v1.Health/Check
//	grpcurl -plaintext -H "authorization: Bearer $TOKEN" \
//	  -d '{"model":"cloison-context-bag","chat":{"messages":[{"role":"user","content":"Bonjour"}]},"max_tokens":16}' \
//	  127.0.0.1:9090 cloison.inference.v1.InferenceService/Generate
//
// (grpcurl: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@latest.)
// Without --public-tls-cert the gRPC port is plaintext; bind it to loopback or
// put it behind a TLS-terminating proxy.
//
// POST /v1/embeddings (embeddings.go) reads OpenAI's input shapes
// (string, strings, ids, lists of ids), encoding_format float or base64
// (little-endian float32) and dimensions, checked against embeddingFields,
// and answers service.Embed's vectors with usage. POST /v1/rerank and
// POST /v1/score (rerank.go, rerankFields and scoreFields) turn a query and
// its documents, or text_1 and text_2, into pairs that service.Rank scores
// with a cross-encoder or a decoder reranker; rerank sorts them (top_n, return_documents). gRPC
// InferenceService.Rerank and Score run the same code.
package api
