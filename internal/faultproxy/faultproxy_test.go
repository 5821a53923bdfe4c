package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloison/cloison/internal/testwait"
)

// echo is a TCP echo server that counts the bytes it received.
type echo struct {
	ln       net.Listener
	received atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn // guarded by mu
}

func newEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					e.received.Add(int64(n))
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(e.close)
	return e
}

func (e *echo) close() {
	e.ln.Close()
	e.mu.Lock()
	for _, c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// exchange writes msg on c (in the background) and reads until want bytes
// came back, the connection ended or d passed. It returns what came back and
// the read error (nil when want bytes arrived).
func exchange(c net.Conn, msg []byte, want int, d time.Duration) ([]byte, error) {
	go c.Write(msg) //nolint:errcheck // a cut connection fails the write; the read reports it
	c.SetReadDeadline(time.Now().Add(d))
	got := make([]byte, 0, want)
	buf := make([]byte, 4096)
	for len(got) < want {
		n, err := c.Read(buf[:min(len(buf), want-len(got))])
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestFaultProxy(t *testing.T) {
	const size = 200 << 10
	msg := payload(size)
	tests := []struct {
		name string
		run  func(t *testing.T, p *Proxy, e *echo, c net.Conn)
	}{
		{"pass", func(t *testing.T, p *Proxy, e *echo, c net.Conn) {
			got, err := exchange(c, msg, size, 5*time.Second)
			if err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("got %d bytes (%v), want the %d sent back", len(got), err, size)
			}
			if s := p.Stats(); s.Up != size || s.Down != size || s.Live != 1 || s.Accepted != 1 {
				t.Fatalf("got %+v, want %d bytes each way on one live connection", s, size)
			}
		}},
		{"drop now", func(t *testing.T, p *Proxy, e *echo, c net.Conn) {
			if _, err := exchange(c, msg[:10], 10, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			p.Drop()
			if _, err := exchange(c, msg[:10], 10, 5*time.Second); err == nil || isTimeout(err) {
				t.Fatalf("read after Drop: got %v, want the connection closed", err)
			}
			if s := p.Stats(); s.Dropped != 1 {
				t.Fatalf("got %d dropped, want 1", s.Dropped)
			}
		}},
		{"drop after N bytes up", func(t *testing.T, p *Proxy, e *echo, c net.Conn) {
			p.DropAfter(Up, 70_000)
			got, err := exchange(c, msg, size, 5*time.Second)
			if err == nil || isTimeout(err) {
				t.Fatalf("got %d bytes and %v, want the connection cut", len(got), err)
			}
			// The cut resets the target's side, which may lose what it had
			// not read yet: at most the 70000 forwarded bytes arrive.
			if n := e.received.Load(); n > 70_000 {
				t.Fatalf("the target received %d bytes, want at most 70000", n)
			}
			if s := p.Stats(); s.Up != 70_000 || s.Dropped != 1 {
				t.Fatalf("got %+v, want 70000 bytes up and one connection dropped", s)
			}
		}},
		{"drop after N bytes down", func(t *testing.T, p *Proxy, e *echo, c net.Conn) {
			p.DropAfter(Down, 12_345)
			got, err := exchange(c, msg, size, 5*time.Second)
			if len(got) != 12_345 || !bytes.Equal(got, msg[:len(got)]) || err == nil || isTimeout(err) {
				t.Fatalf("got %d bytes and %v, want the first 12345 then the connection cut", len(got), err)
			}
		}},
		{"stall and resume", func(t *testing.T, p *Proxy, e *echo, c net.Conn) {
			p.Stall()
			got, err := exchange(c, msg, size, 200*time.Millisecond)
			if len(got) != 0 || !isTimeout(err) {
				t.Fatalf("stalled: got %d bytes and %v, want nothing and a timeout", len(got), err)
			}
			if s := p.Stats(); !s.Stalled || s.Live != 1 || e.received.Load() != 0 {
				t.Fatalf("stalled: got %+v and %d bytes at the target, want a live stalled connection and none", s, e.received.Load())
			}
			p.Resume()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			rest := make([]byte, size)
			if _, err := io.ReadFull(c, rest); err != nil || !bytes.Equal(rest, msg) {
				t.Fatalf("after Resume: %v, want the %d bytes back", err, size)
			}
		}},
		{"stall after N bytes up", func(t *testing.T, p *Proxy, e *echo, c net.Conn) {
			p.StallAfter(Up, 50_000)
			// Both directions stop once 50000 bytes went up: the echo of
			// those is held too.
			got, err := exchange(c, msg, size, 300*time.Millisecond)
			if !isTimeout(err) || len(got) > 50_000 || e.received.Load() != 50_000 || !p.Stats().Stalled {
				t.Fatalf("got %d bytes back, %d at the target and %v, want at most 50000, 50000, a timeout and a stall", len(got), e.received.Load(), err)
			}
			p.Pass()
			rest := make([]byte, size-len(got))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, rest); err != nil || !bytes.Equal(append(got, rest...), msg) {
				t.Fatalf("after Pass: %v, want the rest of the bytes back", err)
			}
		}},
		{"refuse new connections", func(t *testing.T, p *Proxy, e *echo, c net.Conn) {
			p.Refuse()
			d, err := net.Dial("tcp", p.Addr())
			if err == nil {
				_, err = exchange(d, msg[:10], 10, 5*time.Second)
				d.Close()
			}
			if err == nil || isTimeout(err) {
				t.Fatalf("a new connection while refusing: %v, want it reset", err)
			}
			// The live connection is untouched.
			if got, err := exchange(c, msg[:100], 100, 5*time.Second); err != nil || !bytes.Equal(got, msg[:100]) {
				t.Fatalf("the live connection while refusing: %v", err)
			}
			if s := p.Stats(); s.Refused != 1 {
				t.Fatalf("got %d refused, want 1", s.Refused)
			}
		}},
	}
	base := runtime.NumGoroutine()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEcho(t)
			p, err := New(e.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			testwait.Eventually(t, 5*time.Second, func() bool { return p.Stats().Live == 1 }, "the connection to be proxied")
			tt.run(t, p, e, c)

			// After any fault, Pass heals the path for new connections.
			p.Pass()
			c2, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			if got, err := exchange(c2, msg[:1000], 1000, 5*time.Second); err != nil || !bytes.Equal(got, msg[:1000]) {
				t.Fatalf("a new connection after Pass: %d bytes, %v", len(got), err)
			}
		})
	}
	// Close waits for every goroutine the proxies started (the echo
	// servers' too, by their cleanup).
	testwait.Eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= base }, "goroutines to end")
}

// Close returns only after every pump ended, with connections stalled
// mid-write in both directions.
func TestFaultProxyCloseWaitsForStalledConnections(t *testing.T) {
	e := newEcho(t)
	p, err := New(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var cs []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	testwait.Eventually(t, 5*time.Second, func() bool { return p.Stats().Live == 3 }, "three connections")
	p.StallAfter(Down, 1000)
	for _, c := range cs {
		go c.Write(payload(1 << 20)) //nolint:errcheck // closed by p.Close
	}
	testwait.Eventually(t, 5*time.Second, func() bool { return p.Stats().Stalled }, "the stall")
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("got %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if s := p.Stats(); s.Live != 0 {
		t.Fatalf("got %d live connections after Close, want 0", s.Live)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: got %v, want nil", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
}

// A target that does not answer: the client's connection is reset and the
// dial error is kept.
func TestFaultProxyTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr()) // may already see the reset
	if err == nil {
		defer c.Close()
		_, err = exchange(c, []byte("x"), 1, 5*time.Second)
	}
	if err == nil || isTimeout(err) {
		t.Fatalf("got %v, want the connection reset", err)
	}
	if s := p.Stats(); s.DialErr == nil {
		t.Fatal("got no dial error, want one")
	}
}
