// Package tracing is Cloison's OpenTelemetry tracing: the tracer provider a
// node is built with (New: an OTLP/gRPC exporter when an endpoint is
// configured, otherwise a no-op provider that records nothing), and W3C
// Trace Context propagation in and out — HTTP headers (HTTP), gRPC metadata
// on the server side (UnaryServer, StreamServer) and on calls a node makes
// to another (UnaryClient, StreamClient: a decode node's PrefillService
// call, a prefill node's transfer stream), so that a disaggregated request
// is one trace across its two nodes.
//
// What a span may carry: identifiers (request id, decision id, the tenant
// id as the logs carry it, the model id), counts and codes. Never prompt or
// completion text, never an error's message (Fail records the error's
// cloison code only: messages may quote what a client sent).
//
// The exporter (OTLP over gRPC, batched, parent-based sampling at
// Config.SampleRatio) also reads the standard OTEL_EXPORTER_OTLP_*
// environment (headers, compression, timeout); Config's endpoint and TLS
// win over it. A collector that is down delays nothing: spans it misses are
// dropped, never a request.
//
// Propagation works with tracing off too: a no-op provider's spans carry
// the incoming span context, so a traceparent received is still sent on to
// the prefill node, but nothing is recorded or exported.
//
// The spans of a request (api, engine, node name them):
//
//	POST /v1/chat/completions (server; parent: the incoming traceparent)
//	├── auth                      JWT verification
//	└── inference                 request id, model, tenant, token counts
//	    ├── policy                OPA decision (decision id, allowed)
//	    ├── ledger.append         policy.decision, request.completed, …
//	    ├── queue                 Submit → first scheduling (engine timings)
//	    ├── prefill               first scheduling → first token
//	    ├── transfer              decode node: reservation → verified KV
//	    │   └── cloison.prefill.v1.PrefillService/Prefill (prefill node, server)
//	    │       ├── prefill.compute   forward passes over the prompt
//	    │       └── transfer.send     KV pushed, until the decode node verified it
//	    └── decode                first token → last
package tracing
