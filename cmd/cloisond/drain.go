package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// Shutdown behind a load balancer.
//
// On SIGTERM the node first drains: /readyz answers 503 at once (and gRPC
// health NOT_SERVING), so the load balancer or Kubernetes endpoints
// controller stops sending new work, while the listeners stay open for
// --drain-period and keep serving whatever still arrives (requests routed
// before the balancer noticed). Responses sent while draining carry
// "Connection: close", so keep-alive clients reconnect elsewhere. Then the
// graceful shutdown runs as before: no new connections, streams finish
// within --shutdown-grace, the engine stops, the process exits.
type drainer struct {
	draining atomic.Bool
}

// wrap answers /readyz (and /health, without a body) with 503 once draining, and passes everything else
// to h.
func (d *drainer) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.draining.Load() {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/health" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/readyz" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"reason":"draining","status":"not ready"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// drain marks the node not ready and waits period, or less when ctx ends
// or a second SIGTERM or interrupt comes (an operator in a hurry).
func (d *drainer) drain(ctx context.Context, period time.Duration) {
	d.draining.Store(true)
	if period <= 0 {
		return
	}
	abort, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTimer(period)
	defer t.Stop()
	select {
	case <-t.C:
	case <-abort.Done():
	}
}
