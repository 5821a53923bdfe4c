package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/cloison/cloison/console"
)

// consoleConfig is the web console's listener (package console): the page
// and the node's admin and compliance routes on an origin of their own.
type consoleConfig struct {
	addr      string // "": the default (dev: an ephemeral loopback port; else none); "off": none
	readyFile string
	oidc      console.OIDC // --console-oidc-*: sign-in with the provider, when set
}

func (o *consoleConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "console-addr", "", "web console listener (the console page and the node's /admin/v1, /compliance/v1 and /v1/attestation routes, nothing else); empty: none, except with --dev an ephemeral loopback port (logged, --console-ready-file); off: none even with --dev; a non-loopback address needs TLS (--public-tls-cert) or --insecure-listen")
	fs.StringVar(&o.readyFile, "console-ready-file", "", "write the console's listen address to this file once serving (make run, tests; written before --ready-file)")
	fs.StringVar(&o.oidc.AuthorizeURL, "console-oidc-authorize-url", "", "console sign-in with an OpenID Connect provider (authorization code + PKCE, public client): its authorization endpoint (https; http to loopback); needs --console-oidc-token-url, --console-oidc-client-id and --jwks-url (the node must trust its tokens)")
	fs.StringVar(&o.oidc.TokenURL, "console-oidc-token-url", "", "console sign-in: the provider's token endpoint, which the page calls (https; http to loopback; it must allow the console's origin with CORS)")
	fs.StringVar(&o.oidc.ClientID, "console-oidc-client-id", "", "console sign-in: the console's client id at the provider (a public client; its redirect URI is the console's own URL, ending in /)")
	fs.StringVar(&o.oidc.Scope, "console-oidc-scope", "openid", "console sign-in: the scopes the console asks the provider for (space-separated)")
}

// check refuses a half-configured console sign-in, or one whose tokens the
// node would not accept.
func (o consoleConfig) check(jwksURL string) error {
	set := 0
	for _, v := range []string{o.oidc.AuthorizeURL, o.oidc.TokenURL, o.oidc.ClientID} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 0:
		return nil
	case set < 3:
		return errors.New("--console-oidc-authorize-url, --console-oidc-token-url and --console-oidc-client-id go together")
	case jwksURL == "":
		return errors.New("--console-oidc-* needs --jwks-url and --jwt-issuer: the node must trust the provider's tokens")
	}
	if err := console.CheckURL("--console-oidc-authorize-url", o.oidc.AuthorizeURL); err != nil {
		return err
	}
	return console.CheckURL("--console-oidc-token-url", o.oidc.TokenURL)
}

// listenAddr is the address the console listens on, "" for none.
func (o consoleConfig) listenAddr(dev bool) string {
	switch {
	case o.addr == "off":
		return ""
	case o.addr == "" && dev:
		return "127.0.0.1:0"
	}
	return o.addr
}

// serveConsole serves the console on its listener, forwarding its API
// calls to api (the node's own handler, in process), with the public
// listeners' TLS and connection limits. stop shuts it down.
func serveConsole(c config, api http.Handler, log *slog.Logger) (stop func(), err error) {
	addr := c.console.listenAddr(c.keys.dev)
	if addr == "" {
		return func() {}, nil
	}
	tlsConfig, err := c.net.tlsConfig()
	if err != nil {
		return nil, err
	}
	ln, err := c.net.transport.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("--console-addr: %w", err)
	}
	opts := console.Options{TLS: tlsConfig != nil}
	if c.console.oidc.ClientID != "" {
		oidc := c.console.oidc
		opts.OIDC = &oidc
	}
	h := console.Handler(api, opts)
	hs := c.net.transport.HTTPServer(h, tlsConfig, slog.NewLogLogger(log.Handler(), slog.LevelWarn))
	go func() {
		if err := serveHTTP(hs, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("console listener", "err", err)
		}
	}()
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	log.Info("serving the console", "url", scheme+"://"+ln.Addr().String()+"/")
	if c.console.readyFile != "" {
		_ = os.WriteFile(c.console.readyFile, []byte(ln.Addr().String()), 0o600)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.shutdownGrace)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}
