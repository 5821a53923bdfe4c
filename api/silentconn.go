package api

import (
	"net"
	"sync"
	"time"
)

// silentLimit is the listener under the global connection cap that keeps
// connections which have sent nothing from filling it: at most perSource
// such connections per source address are accepted (one more is closed at
// once, before it takes a slot of the cap), and each must send its first
// byte within firstByte or is closed. A connection leaves its source's
// count at its first byte; from then on the header, handshake and idle
// limits and the per-tenant cap bound it. Before this, silent connections
// held slots of --max-connections for the whole header timeout, and a
// thousand of them from one host kept every other client waiting.
type silentLimit struct {
	net.Listener
	perSource int
	firstByte time.Duration

	mu     sync.Mutex
	silent map[string]int // source address → connections that have sent nothing yet
}

func (l *silentLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr())
		l.mu.Lock()
		over := l.silent[src] >= l.perSource
		if !over {
			l.silent[src]++
		}
		l.mu.Unlock()
		if over {
			_ = c.Close()
			continue
		}
		sc := &silentConn{Conn: c, l: l, src: src, firstBy: time.Now().Add(l.firstByte)}
		_ = c.SetReadDeadline(sc.firstBy)
		return sc, nil
	}
}

func (l *silentLimit) spoke(src string) {
	l.mu.Lock()
	if l.silent[src]--; l.silent[src] <= 0 {
		delete(l.silent, src)
	}
	l.mu.Unlock()
}

func sourceOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// silentConn holds the first-byte deadline until the first byte arrives:
// a read deadline the server sets meanwhile (its header or handshake
// timeout) applies only where it is earlier, and is restored in full at
// the first byte.
type silentConn struct {
	net.Conn
	l       *silentLimit
	src     string
	firstBy time.Time

	mu     sync.Mutex
	spoken bool
	closed bool
	read   time.Time // the read deadline the server asked for
}

func (c *silentConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		first := !c.spoken && !c.closed
		if first {
			c.spoken = true
			_ = c.Conn.SetReadDeadline(c.read)
		}
		c.mu.Unlock()
		if first {
			c.l.spoke(c.src)
		}
	}
	return n, err
}

func (c *silentConn) effective(t time.Time) time.Time {
	if c.spoken || (!t.IsZero() && t.Before(c.firstBy)) {
		return t
	}
	return c.firstBy
}

func (c *silentConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = t
	return c.Conn.SetReadDeadline(c.effective(t))
}

func (c *silentConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = t
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(c.effective(t))
}

func (c *silentConn) Close() error {
	c.mu.Lock()
	release := !c.spoken && !c.closed
	c.closed = true
	c.mu.Unlock()
	if release {
		c.l.spoke(c.src)
	}
	return c.Conn.Close()
}
