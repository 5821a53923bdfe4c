package console

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of every answer: scripts, styles,
// images and fetches from the console's own origin only; no inline script
// or style, no eval, no plugin, no base or form target, no framing; and
// Trusted Types required, so an assignment to an HTML sink (innerHTML,
// outerHTML, insertAdjacentHTML, document.write) throws in the browser
// instead of parsing markup.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// Options configure Handler.
type Options struct {
	// TLS: the console is served over HTTPS; answers carry
	// Strict-Transport-Security.
	TLS bool
	// OIDC, when set, offers sign-in with the deployment's OpenID Connect
	// provider (authorization code with PKCE): the page reads it from
	// GET /config.json, and the CSP lets it reach the token endpoint.
	OIDC *OIDC
}

// OIDC is the provider the console signs in with: a public client (no
// secret) using the authorization code flow with PKCE (S256). The access
// token it obtains is sent to the API as any bearer token is, so the node
// must trust the provider (cloisond --jwks-url, --jwt-issuer).
type OIDC struct {
	AuthorizeURL string `json:"authorize_url"`
	TokenURL     string `json:"token_url"`
	ClientID     string `json:"client_id"`
	Scope        string `json:"scope"`
}

// CheckURL refuses an endpoint the page could not use safely: not https,
// except http to a loopback host (development), or with a fragment.
func CheckURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%s %q: not an absolute URL without fragment or credentials", name, raw)
	}
	h := u.Hostname()
	loop := h == "localhost" || (net.ParseIP(h) != nil && net.ParseIP(h).IsLoopback())
	if u.Scheme != "https" && !(u.Scheme == "http" && loop) {
		return fmt.Errorf("%s %q: https only (http to a loopback host for development)", name, raw)
	}
	return nil
}

// csp is CSP with connect-src widened to the token endpoint's origin when
// OIDC is configured.
func (o Options) csp() string {
	if o.OIDC == nil {
		return CSP
	}
	u, err := url.Parse(o.OIDC.TokenURL)
	if err != nil {
		return CSP
	}
	return strings.Replace(CSP, "connect-src 'self'", "connect-src 'self' "+u.Scheme+"://"+u.Host, 1)
}

// Handler serves the console and forwards its API calls to api, the
// node's own HTTP handler (api.Server.Handler), in process: the console's
// origin is the API's for the page, so its policy allows connect-src
// 'self' only and no CORS is needed. Only the routes the package doc lists
// are served; anything else is 404 and never reaches api.
//
// A call forwarded to api loses any Cookie header (the console sets none,
// and the API reads none) and is refused with 403 when the browser says it
// comes from another site (Sec-Fetch-Site: cross-site or same-site), a
// second line behind the bearer token, which a cross-site page cannot send.
func Handler(api http.Handler, o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { serveAsset(w, r, "index.html") })
	mux.HandleFunc("GET /assets/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if name == "index.html" {
			http.NotFound(w, r)
			return
		}
		serveAsset(w, r, name)
	})
	cfg, _ := json.Marshal(struct {
		OIDC *OIDC `json:"oidc,omitempty"`
	}{o.OIDC})
	mux.HandleFunc("GET /config.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(cfg)
	})
	fwd := forward(api)
	mux.Handle("/admin/v1/", fwd)
	mux.Handle("/compliance/v1/", fwd)
	mux.Handle("GET /v1/attestation", fwd)
	mux.HandleFunc("/", http.NotFound)
	return securityHeaders(mux, o)
}

// forward hands an API call to api after the checks Handler documents.
func forward(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "cross-site", "same-site":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":{"message":"cross-site request refused","type":"invalid_request_error","code":"cross_site"}}` + "\n"))
			return
		}
		r.Header.Del("Cookie")
		api.ServeHTTP(w, r)
	})
}

// securityHeaders sets the headers every answer carries, API answers
// included, before the handler writes (handlers set Content-Type only).
func securityHeaders(h http.Handler, o Options) http.Handler {
	csp := o.csp()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
		hd.Set("Cache-Control", "no-store")
		if o.TLS {
			hd.Set("Strict-Transport-Security", "max-age=31536000")
		}
		h.ServeHTTP(w, r)
	})
}

// serveAsset writes the embedded file name (a plain name, no directory),
// or 404.
func serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(assets, "assets/"+name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	if ct == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}
