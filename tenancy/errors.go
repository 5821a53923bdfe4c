package tenancy

import (
	"errors"
	"fmt"
	"time"

	"github.com/cloison/cloison"
)

// Store and validation errors.
var (
	// ErrNotFound: no tenant, client or key of that id.
	ErrNotFound = cloison.NewError(cloison.CodeNotFound, "tenancy: not found")
	// ErrConflict: an id already taken, or a concurrent change that lost.
	ErrConflict = cloison.NewError(cloison.CodeConflict, "tenancy: conflict")
	// ErrInvalidTenant: a tenant record the rules refuse.
	ErrInvalidTenant = cloison.NewError(cloison.CodeInvalid, "tenancy: invalid tenant")
	// ErrInvalidClient: an API client record the rules refuse.
	ErrInvalidClient = cloison.NewError(cloison.CodeInvalid, "tenancy: invalid api client")
	// ErrInvalidKey: key material, a key-encryption key or a JWKS document
	// that cannot be used.
	ErrInvalidKey = cloison.NewError(cloison.CodeInvalid, "tenancy: invalid key")
	// ErrInvalidToken: an Issue request the issuer refuses (no tenant, no
	// subject, unknown scope, lifetime out of bounds).
	ErrInvalidToken = cloison.NewError(cloison.CodeInvalid, "tenancy: invalid token request")
	// ErrStore: the database failed in a way callers cannot fix.
	ErrStore = cloison.NewError(cloison.CodeInternal, "tenancy: store failure")
	// ErrUnavailable: the database cannot be reached.
	ErrUnavailable = cloison.NewError(cloison.CodeUnavailable, "tenancy: store unavailable")
)

// Authentication errors: Verify returns exactly one of these, wrapped with
// detail that is safe to log but not meant for the client (the API answers
// with the sentinel's message only).
var (
	ErrTokenMalformed   = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: malformed token")
	ErrTokenAlgorithm   = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token signing algorithm not accepted")
	ErrUnknownKey       = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token signed by an unknown key")
	ErrTokenSignature   = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token signature invalid")
	ErrTokenIssuer      = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token issuer not trusted")
	ErrTokenAudience    = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token audience not accepted")
	ErrTokenExpired     = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token expired")
	ErrTokenNotYetValid = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token not yet valid")
	ErrTokenNoExpiry    = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token has no expiry")
	ErrTokenNoTenant    = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token names no tenant")
	ErrTokenNoSubject   = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token names no subject")
	ErrUnknownScope     = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: unknown scope")
	// ErrUnknownTenant: the token's tenant does not exist. Unauthenticated,
	// not not_found: an unauthenticated caller learns nothing about which
	// tenants exist.
	ErrUnknownTenant = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token tenant unknown")
	// ErrUnknownClient: the verifier requires registered clients and the
	// subject is none, or the client belongs to another tenant.
	ErrUnknownClient = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token subject is not a registered client")
	// ErrTokenRevoked: the token's jti is on the revocation list.
	ErrTokenRevoked = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: token revoked")
	// ErrClientRevoked: the subject is a revoked API client.
	ErrClientRevoked = cloison.NewError(cloison.CodeUnauthenticated, "tenancy: api client revoked")
	// ErrTenantSuspended: the tenant exists and is suspended.
	ErrTenantSuspended = cloison.NewError(cloison.CodePermissionDenied, "tenancy: tenant suspended")
	// ErrScopeNotGranted: the token lacks a scope the operation requires, or
	// carries one its client was never granted.
	ErrScopeNotGranted = cloison.NewError(cloison.CodePermissionDenied, "tenancy: scope not granted")
)

// Limiter sentinels; the errors Admit returns are *LimitError values that
// match one of them with errors.Is.
var (
	// ErrRateLimited: the tenant's tokens-per-minute bucket is short;
	// retry after LimitError.RetryAfter.
	ErrRateLimited = cloison.NewError(cloison.CodeRateLimited, "tenancy: rate limit exceeded")
	// ErrQuotaExceeded: the tenant has its maximum of concurrent requests in
	// flight, or one request asks for more tokens than its bucket can ever
	// hold (RetryAfter is then zero: retrying cannot help).
	ErrQuotaExceeded = cloison.NewError(cloison.CodeQuotaExceeded, "tenancy: quota exceeded")
)

// LimitError is a limiter's rejection. The API sends RetryAfter as the
// Retry-After header and a google.rpc.RetryInfo detail (whole seconds,
// rounded up) when it is not zero, through RetryDelay.
type LimitError struct {
	sentinel   *cloison.Error
	Tenant     cloison.TenantID
	Limit      string // "tokens_per_minute", "concurrent_requests", "kv_pages" or "quotas"
	RetryAfter time.Duration
	detail     string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: tenant %s: %s", e.sentinel.Message, e.Tenant, e.detail)
}

// ErrorCode reports rate_limit_exceeded or quota_exceeded.
func (e *LimitError) ErrorCode() cloison.Code { return e.sentinel.Code }

// RetryDelay returns RetryAfter: the hint cloison.RetryAfter finds.
func (e *LimitError) RetryDelay() time.Duration { return e.RetryAfter }

// PublicMessage names the sentinel and the limit, not the counts: the
// counts stay in Error, for the log.
func (e *LimitError) PublicMessage() string {
	return e.sentinel.Message + " (" + e.Limit + ")"
}

// Unwrap makes errors.Is(err, ErrRateLimited) (or ErrQuotaExceeded) hold.
func (e *LimitError) Unwrap() error { return e.sentinel }

// RetryAfter returns the wait a limiter rejection in err's chain asks for.
func RetryAfter(err error) (time.Duration, bool) {
	var le *LimitError
	if errors.As(err, &le) && le.RetryAfter > 0 {
		return le.RetryAfter, true
	}
	return 0, false
}
