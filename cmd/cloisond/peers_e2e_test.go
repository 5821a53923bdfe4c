package main

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/tenancy"
)

// dnsServer is a tiny authoritative DNS server over real UDP answering A
// queries for one name from a list the test changes.
type dnsServer struct {
	conn net.PacketConn
	name string
	mu   sync.Mutex
	ips  []net.IP // guarded by mu
}

func startDNS(t *testing.T, name string) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: pc, name: name}
	t.Cleanup(func() { _ = pc.Close() })
	go s.serve()
	return s
}

func (s *dnsServer) set(ips ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ips = nil
	for _, ip := range ips {
		s.ips = append(s.ips, net.ParseIP(ip).To4())
	}
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if strings.EqualFold(q.Name.String(), s.name) && q.Type == dnsmessage.TypeA {
			s.mu.Lock()
			for _, ip := range s.ips {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: [4]byte(ip)})
			}
			s.mu.Unlock()
		}
		msg, err := b.Finish()
		if err == nil {
			_, _ = s.conn.WriteTo(msg, from)
		}
	}
}

// A decode node whose --prefill-peers entry is a name (a
// headless service) gains a prefill node when the name starts resolving to
// it, attested before its first request, and loses one that stops (its
// attestation no longer answers), without a restart; an address whose
// node's attestation does not cover this node never serves. The resolver is a real DNS
// server over UDP that the test controls.
func TestE2EPrefillPeersByDNS(t *testing.T) {
	hosts := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	c := newClusterHosts(t, append([]string{"127.0.0.1"}, hosts...), "prefill-1", "prefill-2", "prefill-3", "decode")
	dns := startDNS(t, "prefill.cloison.test.")
	port := strconv.Itoa(freePort(t))
	db := pgtest.New(t)
	p1 := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey, "--prefill-addr", hosts[0]+":"+port)
	dns.set(hosts[0])
	d := startNode(t, db.AdminURL, pgtestRoles(), c.flags("decode", "decode", c.clusterKey, "--transfer-addr", "127.0.0.1:0",
		"--prefill-peers", "prefill.cloison.test:"+port, "--prefill-resolve-interval", "200ms", "--prefill-dns-server", dns.conn.LocalAddr().String())...)
	createTenant(t, db.AdminURL, "acme", nil)
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)
	served := func(p *daemon) int { return strings.Count(p.logs.String(), `"msg":"prefill"`) }
	var count int
	complete := func(what string) {
		t.Helper()
		count++ // a new prompt each time: the decode node's prefix cache would serve a repeat itself
		if st, _, code := completionText(t, d, tok, strconv.Itoa(count)+" the quick brown fox", 4); st != 200 {
			t.Fatalf("%s: got %d %s, want 200\ndecode:\n%s", what, st, code, d.logs)
		}
	}
	complete("one prefill node")

	// A second node joins the service: used without a restart.
	p2 := c.prefillNode(t, db.AdminURL, "prefill-2", c.clusterKey, "--prefill-addr", hosts[1]+":"+port)
	// A third that serves a shorter context than the decode node: it fails
	// the decode node's check of its attestation and must never be asked.
	p3 := c.prefillNode(t, db.AdminURL, "prefill-3", c.clusterKey, "--prefill-addr", hosts[2]+":"+port, "--kv-pages", "8", "--served-context", "64")
	dns.set(hosts...)
	testwait.Eventually(t, 10*time.Second, func() bool {
		complete("while prefill-2 joins")
		return served(p2) > 0
	}, "prefill-2 joins\n%s", testwait.Lazy(func() string { return d.logs.String() + p2.logs.String() }))
	if !strings.Contains(d.logs.String(), "prefill node left out") {
		t.Errorf("prefill-3 (failed attestation) was not reported as left out:\n%s", d.logs)
	}

	// prefill-1 stops (the pod is gone, its A record not yet): dropped
	// when it no longer attests; requests keep being served by prefill-2.
	p1.stop()
	// The decode node logs its set each time it changes: wait for the set
	// that is prefill-2 alone (prefill-3 is never in it).
	alone := `"peers":"` + net.JoinHostPort(hosts[1], port) + `"`
	testwait.Eventually(t, 10*time.Second, func() bool { return strings.Contains(d.logs.String(), alone) },
		"prefill-1 dropped (%s)\n%s", alone, testwait.Lazy(d.logs.String))
	before := served(p2)
	for range 4 {
		complete("after prefill-1 stopped")
	}
	if got := served(p2) - before; got != 4 {
		t.Errorf("after prefill-1 stopped: prefill-2 prefilled %d of 4, want 4", got)
	}
	if n := served(p3); n != 0 {
		t.Errorf("prefill-3, which failed its attestation, prefilled %d requests, want 0", n)
	}
}
