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
}

func (o *consoleConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "console-addr", "", "web console listener (the console page and the node's /admin/v1, /compliance/v1 and /v1/attestation routes, nothing else); empty: none, except with --dev an ephemeral loopback port (logged, --console-ready-file); off: none even with --dev; a non-loopback address needs TLS (--public-tls-cert) or --insecure-listen")
	fs.StringVar(&o.readyFile, "console-ready-file", "", "write the console's listen address to this file once serving (make run, tests; written before --ready-file)")
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
	h := console.Handler(api, console.Options{TLS: tlsConfig != nil})
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
