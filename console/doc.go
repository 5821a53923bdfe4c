// Package console is the web console of the privacy officer, the
// platform administrator and a client tenant's compliance officer: a few
// static files (HTML, CSS, JavaScript modules) embedded in the binary and
// served by cloisond on a listener of its own (--console-addr), beside the
// node's admin and compliance API routes, which it reaches through the
// same origin.
//
// The console holds no privilege of its own. The page keeps the signed-in
// person's bearer token in memory (never in a cookie or in storage) and
// sends it as Authorization with every call; Handler hands those calls to
// the node's own API handler, unchanged, so every read and every change is
// authenticated, scope-checked and ledgered exactly as the same call made
// with curl or cloisonctl, with the token's subject as actor. The token is
// pasted, or obtained from the deployment's OpenID Connect provider with
// the authorization code flow and PKCE (Options.OIDC). Because no
// credential is ever sent by the browser on its own, a page of another
// origin cannot make a signed-in console act (no CSRF), and there is no
// session to fix.
//
// What Handler serves, and nothing else (TestConsoleServesNothingElse):
//
//	GET /                     the page (index.html)
//	GET /config.json          how the page signs in (Options.OIDC; nothing secret)
//	GET /assets/{name}        its scripts, style sheet and icon (embedded)
//	/admin/v1/...             the node's admin API (admin.go in package api)
//	/compliance/v1/...        the node's compliance and transparency-log API
//	GET /v1/attestation       the node's capacity attestation
//
// Every answer carries a Content-Security-Policy without inline script,
// eval or framing (and Trusted Types required, so an HTML sink throws),
// X-Content-Type-Options, X-Frame-Options, Referrer-Policy and
// Cache-Control: no-store (securityHeaders); the scripts render every
// string that comes from the API as text (textContent), never as HTML.
// docs/console.md has the argument in full.
package console
