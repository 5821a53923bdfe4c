package main

import (
	"context"
	"flag"
	"net"
	"time"
)

// Prefill peers found by DNS.
//
// With --prefill-resolve-interval > 0, each --prefill-peers entry
// HOST:PORT whose host is a name (a Kubernetes headless service: one A
// record per ready prefill pod) is resolved to all its addresses, at start
// and then every interval. Every address is attested (PrefillService.Attest,
// checked by attest.Prefill against this node, and its pool must hold
// the prompt bound admission uses) before it joins the set the decode node
// asks; an address that no longer resolves, does not answer, or fails its
// attestation is dropped at the next round. A resolution error keeps the
// current set (a DNS hiccup drops nobody). So a decode node gains or loses
// prefill nodes without a restart, and never sends a request to a node it
// has not attested.
type peersConfig struct {
	interval  time.Duration
	dnsServer string
}

func (p *peersConfig) flags(fs *flag.FlagSet) {
	fs.DurationVar(&p.interval, "prefill-resolve-interval", 0, "decode: re-resolve --prefill-peers names (e.g. a headless service) this often, attesting each new address before use and dropping failing ones (0: the list is fixed at start)")
	fs.StringVar(&p.dnsServer, "prefill-dns-server", "", "decode: DNS server (HOST:PORT, UDP) for --prefill-peers names (empty: the system resolver)")
}

// lookup returns the host-to-addresses function the configuration names.
func (p *peersConfig) lookup() func(ctx context.Context, host string) ([]string, error) {
	if p.dnsServer == "" {
		return net.DefaultResolver.LookupHost
	}
	server := p.dnsServer
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server)
	}}
	return r.LookupHost
}
