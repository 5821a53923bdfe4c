package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/transfer/prefillrpc"
)

// Prefill peers found by DNS (DecodeSpec.ResolveInterval).
//
// Each peer entry HOST:PORT whose host is a name (a Kubernetes headless
// service: one A record per ready prefill pod) is resolved to all its
// addresses, at start and then every interval. Every address is attested
// (PrefillService.Attest, checked by attest.Prefill against this node, and
// its pool must hold the prompt bound admission uses) before it joins the
// set the decode node asks; an address that no longer resolves, does not
// answer, or fails its attestation is dropped at the next round. A
// resolution error keeps the current set (a DNS hiccup drops nobody). So a
// decode node gains or loses prefill nodes without a restart, and never
// sends a request to a node it has not attested.
//
// A node serving several models for split requests checks a new address
// for each (further: the models served beside the first, as they are when
// the address is checked): an address that fails any of them is left out,
// as every node of the set prefills every model the decode node serves.

// peerWatcher keeps a decode node's prefill set current.
type peerWatcher struct {
	entries  []string // --prefill-peers, HOST:PORT
	lookup   func(ctx context.Context, host string) ([]string, error)
	client   *prefillrpc.Client
	self     attest.Attestation // this node's own attestation (attest.Prefill's decode side)
	digest   string             // this node's model digest, hex
	capacity int                // set before run: the pool every peer must hold (engine.Remote.Capacity)
	// further, set by New before run: the further models' checks, read
	// at each address's check (a model loaded since is included).
	further func() []peerCheck
	log     *slog.Logger
}

// peerCheck is what a prefill node must attest for one model: the decode
// node's attestation of it, its digest (hex) and the prompt bound.
type peerCheck struct {
	model    string
	self     attest.Attestation
	digest   string
	capacity int
}

// resolve expands the entries into addresses, sorted.
func (w *peerWatcher) resolve(ctx context.Context) ([]string, error) {
	var out []string
	for _, e := range w.entries {
		host, port, err := net.SplitHostPort(e)
		if err != nil {
			return nil, fmt.Errorf("--prefill-peers %q: %w", e, err)
		}
		if net.ParseIP(host) != nil {
			out = append(out, e)
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := w.lookup(lctx, host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("--prefill-peers %s: %w", host, err)
		}
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, port))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// attest checks the node at addr; nil when it may serve this node.
func (w *peerWatcher) attest(ctx context.Context, addr string) (attest.PrefillPeer, error) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := w.client.AttestPeer(actx, addr)
	if err != nil {
		return p, err
	}
	if _, _, err := attest.Prefill(w.self, w.digest, []attest.PrefillPeer{p}); err != nil {
		return p, err
	}
	if w.capacity > 0 && p.Attestation.PoolTokens < w.capacity {
		return p, fmt.Errorf("prefill node %s: pool of %d tokens, this node admits prompts up to %d", addr, p.Attestation.PoolTokens, w.capacity)
	}
	if w.further == nil {
		return p, nil
	}
	for _, c := range w.further() {
		if err := checkPeer(actx, w.client, addr, c); err != nil {
			return p, err
		}
	}
	return p, nil
}

// checkPeer checks the prefill node at addr for one model c.
func checkPeer(ctx context.Context, client *prefillrpc.Client, addr string, c peerCheck) error {
	p, err := client.AttestModel(ctx, addr, c.digest)
	if cloison.ErrorCode(err) == cloison.CodeNotFound {
		p, err = attest.PrefillPeer{Addr: addr}, nil // attest.Prefill: "does not serve model …"
	}
	if err != nil {
		return err
	}
	if _, _, err := attest.Prefill(c.self, c.digest, []attest.PrefillPeer{p}); err != nil {
		return fmt.Errorf("model %s: %w", c.model, err)
	}
	if c.capacity > 0 && p.Attestation.PoolTokens < c.capacity {
		return fmt.Errorf("prefill node %s: model %s: pool of %d tokens, this node admits prompts up to %d", addr, c.model, p.Attestation.PoolTokens, c.capacity)
	}
	return nil
}

// refresh resolves, attests every address and makes those that pass the
// set. It returns the peers that passed.
func (w *peerWatcher) refresh(ctx context.Context) ([]attest.PrefillPeer, error) {
	addrs, err := w.resolve(ctx)
	if err != nil {
		return nil, err
	}
	var good []attest.PrefillPeer
	var keep []string
	for _, a := range addrs {
		p, err := w.attest(ctx, a)
		if err != nil {
			w.log.Warn("prefill node left out", "addr", a, "err", err)
			continue
		}
		good = append(good, p)
		keep = append(keep, a)
	}
	before := w.client.Peers()
	if err := w.client.SetPeers(keep); err != nil {
		return nil, err
	}
	if !slices.Equal(before, keep) {
		w.log.Info("prefill nodes", "peers", strings.Join(keep, ","), "before", strings.Join(before, ","))
	}
	return good, nil
}

// initial runs refresh until at least one node passes or wait ends.
func (w *peerWatcher) initial(ctx context.Context, wait time.Duration) ([]attest.PrefillPeer, error) {
	deadline := time.Now().Add(wait)
	for {
		good, err := w.refresh(ctx)
		if err == nil && len(good) > 0 {
			return good, nil
		}
		if err == nil {
			err = errors.New("no prefill node passed its attestation")
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// run refreshes every interval until ctx ends.
func (w *peerWatcher) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := w.refresh(ctx); err != nil {
			w.log.Warn("prefill nodes: resolution failed; the current set is kept", "err", err)
		}
	}
}
