// Package cloison holds the vocabulary every other package shares: tenant and
// request identifiers and the typed error that carries a stable code from the
// layer that detects a problem to the API that reports it.
//
// It imports only the standard library so that the isolation core and the
// kernels can use it without depending on anything else in the project.
//
// Errors: every package defines its sentinels as *Error values (errors.Is works
// by identity) and wraps them with context using fmt.Errorf("...: %w", err),
// Wrap (a private cause) or Withf (public detail). The API layer maps Code to
// a gRPC status and an HTTP status in one table.
//
// Guarantee: the only text of an error that reaches a client is
// PublicMessage's: the Message of the first coded error in the chain (or a
// typed error's PublicMessage method). Causes, driver text and anything
// fmt.Errorf wrapped around it go to the log with the request id; internal
// errors never reach users with their message. RetryAfter finds the wait a
// refusal asks for (a RetryDelay method, e.g. tenancy.LimitError).
// ErrorCode(err) finds the code through any wrapping; anything without a code
// is internal_error and its text never reaches a client.
package cloison
