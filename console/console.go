package console

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", CSP)
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
