package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// fakeAPI records the paths that reached the node's handler.
type fakeAPI struct {
	paths   []string
	cookies []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.cookies = append(f.cookies, r.Header.Get("Cookie"))
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

func do(h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every answer — the page, an asset, a forwarded API answer, a 404 and a
// refusal — carries the security headers; the CSP allows no inline
// script, no eval and no framing.
func TestSecurityHeaders(t *testing.T) {
	for _, tls := range []bool{false, true} {
		h := Handler(&fakeAPI{}, Options{TLS: tls})
		for _, c := range []struct {
			method, path string
			hdr          map[string]string
			status       int
		}{
			{"GET", "/", nil, 200},
			{"GET", "/assets/app.js", nil, 200},
			{"GET", "/assets/console.css", nil, 200},
			{"GET", "/admin/v1/tenants", nil, 200},
			{"POST", "/compliance/v1/incidents", nil, 200},
			{"GET", "/v1/attestation", nil, 200},
			{"GET", "/nothing", nil, 404},
			{"POST", "/admin/v1/tenants", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		} {
			rec := do(h, c.method, c.path, c.hdr)
			if rec.Code != c.status {
				t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.status)
			}
			want := map[string]string{
				"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
				"Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "Cross-Origin-Opener-Policy": "same-origin",
			}
			if tls {
				want["Strict-Transport-Security"] = "max-age=31536000"
			}
			for k, v := range want {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s %s (tls %v): %s = %q, want %q", c.method, c.path, tls, k, got, v)
				}
			}
			if !tls && rec.Header().Get("Strict-Transport-Security") != "" {
				t.Errorf("%s: HSTS over plain HTTP", c.path)
			}
		}
	}
	directives := map[string]string{}
	for _, d := range strings.Split(CSP, ";") {
		f := strings.Fields(d)
		directives[f[0]] = strings.Join(f[1:], " ")
	}
	for d, v := range map[string]string{"default-src": "'none'", "script-src": "'self'", "style-src": "'self'", "connect-src": "'self'",
		"frame-ancestors": "'none'", "object-src": "'none'", "base-uri": "'none'", "form-action": "'none'",
		"require-trusted-types-for": "'script'", "trusted-types": "'none'"} {
		if directives[d] != v {
			t.Errorf("CSP %s = %q, want %q", d, directives[d], v)
		}
	}
	if strings.Contains(CSP, "unsafe") || strings.Contains(CSP, "data:") || strings.Contains(CSP, "*") {
		t.Errorf("CSP allows unsafe sources: %s", CSP)
	}
}

// The console's origin serves its page, its assets and the admin and
// compliance API, nothing else: the inference API, health, metrics, the
// public log, path tricks and unknown assets are 404 and never reach the
// node's handler.
func TestConsoleServesNothingElse(t *testing.T) {
	for _, c := range []struct {
		method, path string
		forwarded    bool
		status       int
	}{
		{"GET", "/", false, 200},
		{"HEAD", "/", false, 200},
		{"GET", "/assets/app.js", false, 200},
		{"GET", "/admin/v1/tenants", true, 200},
		{"PATCH", "/admin/v1/tenants/acme", true, 200},
		{"GET", "/compliance/v1/tlog/key", true, 200},
		{"POST", "/compliance/v1/ledger/verify", true, 200},
		{"GET", "/v1/attestation", true, 200},
		{"POST", "/v1/chat/completions", false, 404},
		{"POST", "/v1/completions", false, 404},
		{"GET", "/v1/models", false, 404},
		{"POST", "/v1/reports", false, 404},
		{"POST", "/v1/attestation", false, 404},
		{"GET", "/healthz", false, 404},
		{"GET", "/metrics", false, 404},
		{"GET", "/log/checkpoint", false, 404},
		{"GET", "/.well-known/jwks.json", false, 404},
		{"GET", "/index.html", false, 404},
		{"GET", "/assets/index.html", false, 404},
		{"GET", "/assets/", false, 404},
		{"GET", "/assets/nothing.js", false, 404},
		{"GET", "/assets/.hidden", false, 404},
		{"GET", "/assets/x/../../v1/models", false, 307}, // cleaned, then 404 below
		{"GET", "/admin/v1/../../v1/models", false, 307},
		{"POST", "/", false, 404},
	} {
		api := &fakeAPI{}
		h := Handler(api, Options{})
		rec := do(h, c.method, c.path, nil)
		if rec.Code != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.status)
		}
		if got := len(api.paths) > 0; got != c.forwarded {
			t.Errorf("%s %s: forwarded %v, want %v", c.method, c.path, got, c.forwarded)
		}
		if rec.Code == 307 {
			loc := rec.Header().Get("Location")
			if rec2 := do(h, c.method, loc, nil); rec2.Code != 404 || len(api.paths) > 0 {
				t.Errorf("%s %s → %s: %d, forwarded %v", c.method, c.path, loc, rec2.Code, api.paths)
			}
		}
	}
}

// The per-model attestation and a tenant's adapters: the calls the
// console makes reach the node with their query (the model an attestation
// or an adapter's unregistration names) as the page sent it.
func TestForwardsModelAndAdapterCalls(t *testing.T) {
	for _, c := range []struct{ method, target string }{
		{"GET", "/v1/attestation?model=coder"},
		{"GET", "/v1/attestation?model=a%2Fb%40c"},
		{"GET", "/admin/v1/models"},
		{"GET", "/admin/v1/tenants/beta/adapters"},
		{"POST", "/admin/v1/adapters"},
		{"DELETE", "/admin/v1/tenants/beta/adapters/support?model=coder"},
	} {
		var got string
		api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Method + " " + r.URL.RequestURI() })
		rec := do(Handler(api, Options{}), c.method, c.target, nil)
		if want := c.method + " " + c.target; rec.Code != 200 || got != want {
			t.Errorf("%s %s: %d, the node saw %q, want %q", c.method, c.target, rec.Code, got, want)
		}
	}
}

// CSRF, second line: a call the browser marks as coming from another site
// is refused before the API sees it (the first line is the bearer token,
// which a cross-site page cannot send), and a Cookie never reaches the API.
func TestCrossSiteCallsRefused(t *testing.T) {
	for _, c := range []struct {
		site      string
		forwarded bool
	}{{"cross-site", false}, {"same-site", false}, {"same-origin", true}, {"none", true}, {"", true}} {
		api := &fakeAPI{}
		rec := do(Handler(api, Options{}), "POST", "/admin/v1/tenants/acme/suspend", map[string]string{"Sec-Fetch-Site": c.site, "Cookie": "session=x"})
		if got := len(api.paths) > 0; got != c.forwarded {
			t.Errorf("Sec-Fetch-Site %q: forwarded %v, want %v", c.site, got, c.forwarded)
		}
		if !c.forwarded && rec.Code != 403 {
			t.Errorf("Sec-Fetch-Site %q: %d, want 403", c.site, rec.Code)
		}
		for _, ck := range api.cookies {
			if ck != "" {
				t.Errorf("Cookie reached the API: %q", ck)
			}
		}
	}
}

// The page and its scripts hold no HTML sink, no eval, no inline script or
// style, no inline handler, and keep the token out of every storage the
// browser persists (cookies, localStorage, sessionStorage, IndexedDB). The
// CSP (Trusted Types, no unsafe-inline) would stop the first ones in the
// browser; this keeps them out of the source.
func TestAssetsHaveNoSinks(t *testing.T) {
	banned := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\s*\(|new\s+Function|Function\s*\(|srcdoc|localStorage|indexedDB|document\.cookie|setTimeout\s*\(\s*["'\x60]|javascript:`)
	names, err := fs.Glob(assets, "assets/*")
	if err != nil || len(names) == 0 {
		t.Fatal(names, err)
	}
	for _, n := range names {
		b, _ := fs.ReadFile(assets, n)
		s := string(b)
		if m := banned.FindString(s); m != "" {
			t.Errorf("%s uses %q", n, m)
		}
		if strings.HasSuffix(n, ".html") {
			for _, tag := range regexp.MustCompile(`(?is)<script\b[^>]*>(.*?)</script>`).FindAllStringSubmatch(s, -1) {
				if !strings.Contains(tag[0], ` src="/assets/`) || strings.TrimSpace(tag[1]) != "" {
					t.Errorf("%s: inline script %q", n, tag[0])
				}
			}
			if m := regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=|https?://`).FindString(s); m != "" {
				t.Errorf("%s: %q (inline style, inline handler or another origin)", n, m)
			}
		}
		// sessionStorage holds one sign-in's PKCE verifier across the
		// provider's redirect, under one key, and nothing else.
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, "sessionStorage") && !strings.Contains(line, `"cloison.pkce"`) {
				t.Errorf("%s: sessionStorage used for something other than the PKCE verifier: %s", n, strings.TrimSpace(line))
			}
		}
		if strings.HasSuffix(n, ".js") {
			if m := regexp.MustCompile(`https?://|\bimport\s*\(`).FindString(s); m != "" {
				t.Errorf("%s: %q (another origin or a dynamic import)", n, m)
			}
		}
	}
}

// Assets are served with their exact type (a script as JavaScript, so the
// browser runs it as a module under nosniff).
func TestAssetTypes(t *testing.T) {
	h := Handler(&fakeAPI{}, Options{})
	for path, ct := range map[string]string{"/": "text/html; charset=utf-8", "/assets/app.js": "text/javascript; charset=utf-8",
		"/assets/console.css": "text/css; charset=utf-8", "/assets/favicon.svg": "image/svg+xml"} {
		if got := do(h, "GET", path, nil).Header().Get("Content-Type"); got != ct {
			t.Errorf("%s: Content-Type %q, want %q", path, got, ct)
		}
	}
}

// With a provider configured the page learns it from /config.json and its
// CSP lets it call the token endpoint's origin, and only that one; without,
// /config.json says nothing and the CSP is unchanged.
func TestOIDCConfig(t *testing.T) {
	o := &OIDC{AuthorizeURL: "https://idp.example/auth", TokenURL: "https://token.example:8443/oauth/token?x=1", ClientID: "console", Scope: "openid"}
	h := Handler(&fakeAPI{}, Options{OIDC: o})
	rec := do(h, "GET", "/config.json", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"client_id":"console"`) || !strings.Contains(rec.Body.String(), `"token_url":"https://token.example:8443/oauth/token?x=1"`) {
		t.Fatalf("config.json: %d %s", rec.Code, rec.Body)
	}
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self' https://token.example:8443;") || strings.Contains(csp, "idp.example") {
		t.Fatalf("CSP with OIDC: %s", csp)
	}
	if strings.Replace(csp, " https://token.example:8443", "", 1) != CSP {
		t.Fatalf("CSP with OIDC differs from CSP beyond connect-src: %s", csp)
	}
	rec = do(Handler(&fakeAPI{}, Options{}), "GET", "/config.json", nil)
	if rec.Body.String() != "{}" || rec.Header().Get("Content-Security-Policy") != CSP {
		t.Fatalf("config.json without OIDC: %s, CSP %s", rec.Body, rec.Header().Get("Content-Security-Policy"))
	}
}

func TestCheckURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://idp.example/auth": true, "http://127.0.0.1:9000/auth": true, "http://localhost/auth": true, "http://[::1]:1/t": true,
		"http://idp.example/auth": false, "https://idp.example/auth#x": false, "https://u:p@idp.example/": false,
		"/auth": false, "javascript:alert(1)": false, "ftp://idp.example/": false, "": false,
	} {
		if err := CheckURL("u", raw); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", raw, err, ok)
		}
	}
}
