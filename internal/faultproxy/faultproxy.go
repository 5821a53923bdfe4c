package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Direction is the way bytes travel through the proxy.
type Direction int

const (
	Up   Direction = iota // client → target (the side that dialed the proxy sends)
	Down                  // target → client
)

func (d Direction) String() string {
	if d == Up {
		return "up"
	}
	return "down"
}

// after is a one-shot trigger: fire once n more bytes went dir.
type after struct {
	armed bool
	dir   Direction
	left  int64
}

// Proxy forwards TCP connections from Addr to a target. Safe for concurrent
// use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the acceptor and every pump

	mu        sync.Mutex
	cond      *sync.Cond     // on mu: stalled, cutting or a conn closed changed
	conns     map[*conn]bool // guarded by mu: live connections
	closed    bool           // guarded by mu
	refuse    bool           // guarded by mu
	stalled   bool           // guarded by mu
	cutting   bool           // guarded by mu: a DropAfter fired; its pump finishes the mark
	dropAfter after          // guarded by mu
	stallAt   after          // guarded by mu
	bytes     [2]int64       // guarded by mu: forwarded, per Direction
	accepted  int            // guarded by mu
	dropped   int            // guarded by mu: connections closed by a fault
	refused   int            // guarded by mu
	dialErr   error          // guarded by mu: the last failure to reach target
}

// conn is one proxied connection: the client's side and the target's.
type conn struct {
	client, server net.Conn
	closed         bool // guarded by Proxy.mu
}

// New listens on 127.0.0.1:0 and forwards every connection to target
// (host:port), dialed when the client connects. Faults start off (Pass).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[*conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listen address (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Pass clears every fault: stalled bytes flow again, armed triggers are
// disarmed, new connections are accepted. Connections already closed stay
// closed (clients reconnect).
func (p *Proxy) Pass() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse, p.stalled = false, false
	p.dropAfter, p.stallAt = after{}, after{}
	p.cond.Broadcast()
}

// Drop closes both sides of every live connection now. New connections are
// still accepted (combine with Refuse to keep a peer away).
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropAllLocked()
}

// DropAfter arms a one-shot cut: n more bytes (n ≥ 0) are forwarded in dir,
// counted over all connections from now; the connection that carries the
// n-th byte forwards exactly up to it, then every live connection is closed.
// Bytes in the other direction flow meanwhile.
func (p *Proxy) DropAfter(dir Direction, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropAfter = after{armed: true, dir: dir, left: max(n, 0)}
}

// Stall stops forwarding in both directions; connections stay open and new
// ones are accepted (and stall too) until Resume or Pass.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// StallAfter arms a one-shot stall: n more bytes are forwarded in dir
// (counted as for DropAfter), then the proxy stalls as with Stall.
func (p *Proxy) StallAfter(dir Direction, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallAt = after{armed: true, dir: dir, left: max(n, 0)}
}

// Resume ends a stall (armed triggers and Refuse stay as they are).
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = false
	p.cond.Broadcast()
}

// Refuse resets new connections as soon as they are accepted (the client
// sees a reset connection); live connections are left alone.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = true
}

// Stats are the proxy's counters since New.
type Stats struct {
	Up, Down int64 // bytes forwarded per direction
	Accepted int   // connections accepted (refused ones included)
	Live     int   // connections open now
	Dropped  int   // connections closed by Drop or DropAfter
	Refused  int   // connections reset by Refuse
	Stalled  bool  // forwarding is stopped (Stall, or StallAfter fired)
	// DialErr is the last failure to reach the target (nil if none).
	DialErr error
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Up: p.bytes[Up], Down: p.bytes[Down], Accepted: p.accepted, Live: len(p.conns),
		Dropped: p.dropped, Refused: p.refused, Stalled: p.stalled, DialErr: p.dialErr}
}

// Bytes returns the bytes forwarded in dir since New.
func (p *Proxy) Bytes(dir Direction) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes[dir]
}

// Close stops listening, closes every connection and returns once every
// goroutine of the proxy has ended. Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	for c := range p.conns {
		p.closeLocked(c)
	}
	p.mu.Unlock()
	var err error
	if !already {
		err = p.ln.Close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		p.accepted++
		refuse, closed := p.refuse, p.closed
		if refuse {
			p.refused++
		}
		p.mu.Unlock()
		if refuse || closed {
			reset(c)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// reset closes c with a TCP RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		p.mu.Lock()
		p.dialErr = err
		p.mu.Unlock()
		reset(client)
		return
	}
	c := &conn{client: client, server: server}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[c] = true
	p.mu.Unlock()
	var pumps sync.WaitGroup
	pumps.Go(func() { p.pump(c, Up, client, server) })
	pumps.Go(func() { p.pump(c, Down, server, client) })
	pumps.Wait()
	p.mu.Lock()
	p.closeLocked(c)
	delete(p.conns, c)
	p.mu.Unlock()
}

// pump copies src to dst through the fault state. On src's EOF it half-closes
// dst (the other direction may still flow); on any other error, or when a
// fault closed the connection, both sides close.
func (p *Proxy) pump(c *conn, dir Direction, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			k, fire, ok := p.admit(c, dir, len(data))
			if !ok {
				return
			}
			_, err := dst.Write(data[:k])
			if fire {
				p.cut() // even if the write failed: cutting holds every pump
			}
			if err != nil {
				p.abort(c)
				return
			}
			data = data[k:]
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			p.abort(c)
			return
		}
	}
}

// admit waits until up to want bytes may go dir on c and reserves them: k
// bytes to write; fire is true when those bytes reach an armed DropAfter (the
// caller writes them, then cuts). ok is false when c was closed.
func (p *Proxy) admit(c *conn, dir Direction, want int) (k int, fire, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for (p.stalled || p.cutting) && !c.closed {
			p.cond.Wait()
		}
		if c.closed {
			return 0, false, false
		}
		k = want
		if a := &p.dropAfter; a.armed && a.dir == dir {
			k = int(min(int64(k), a.left))
			a.left -= int64(k)
			if a.left == 0 {
				a.armed, fire = false, true
				p.cutting = true // nothing else moves until the cut
			}
		}
		if a := &p.stallAt; a.armed && a.dir == dir {
			k = int(min(int64(k), a.left))
			a.left -= int64(k)
			if a.left == 0 {
				a.armed = false
				p.stalled = true
			}
		}
		if k > 0 || fire {
			p.bytes[dir] += int64(k)
			return k, fire, true
		}
		// A StallAfter that had nothing left fired: wait for Resume.
	}
}

// cut completes a fired DropAfter.
func (p *Proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutting = false
	p.dropAllLocked()
}

// abort closes c after an I/O error on one of its sides.
func (p *Proxy) abort(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked(c)
}

func (p *Proxy) dropAllLocked() {
	for c := range p.conns {
		if !c.closed {
			p.dropped++
		}
		p.closeLocked(c)
	}
	p.cond.Broadcast()
}

func (p *Proxy) closeLocked(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	_ = c.client.Close()
	_ = c.server.Close()
	p.cond.Broadcast()
}
