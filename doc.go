// Package cloison holds the vocabulary every other package shares: tenant and
// request identifiers and the typed error that carries a stable code from the
// layer that detects a problem to the API that reports it.
//
// It imports only the standard library so that the isolation core and the
// kernels can use it without depending on anything else in the project.
//
// Errors: every package defines its sentinels as *Error values (errors.Is works
// by identity) and wraps them with context using fmt.Errorf("...: %w", err).
// The API layer maps Code to a gRPC status and an HTTP status in one table;
// internal errors never reach users with their message.
package cloison
