package api

import (
	"errors"
	"net"
	"sync"
	"time"
)

// silentLimit is the listener under the global connection cap that keeps
// connections which have sent nothing from filling it: at most perSource
// such connections per source address are handed to the server, and each
// must send its first byte within firstByte or is closed. A connection
// leaves its source's count at its first byte; from then on the header,
// handshake and idle limits and the per-tenant cap bound it. Before this,
// silent connections held slots of --max-connections for the whole header
// timeout, and a thousand of them from one host kept every other client
// waiting.
//
// A connection over its source's share is not closed at once: the share
// counts connections whose first byte the server has not read yet, and on
// a busy node that includes clients that sent their request with the
// connection (a burst of new keep-alive connections from one host). It
// waits, outside the cap, up to probation for its first byte, read here:
// one that sends it is handed to the server with that byte in front; one
// that stays silent is closed. At most perSource connections per source
// wait so, each in its own goroutine, so a silent host holds at most
// 2×perSource sockets and never a slot of the cap.
type silentLimit struct {
	net.Listener
	perSource int
	firstByte time.Duration
	probation time.Duration // 0: probationWait

	init      sync.Once
	start     sync.Once
	closeOnce sync.Once
	ready     chan net.Conn
	closing   chan struct{} // closed by Close
	done      chan struct{} // closed when the accept loop ends
	err       error         // the accept loop's error, read after done

	mu      sync.Mutex
	silent  map[string]int // source address → connections handed over that have sent nothing yet
	waiting map[string]int // source address → connections in probation
}

// probationWait is how long a connection over its source's share may take
// to send its first byte: clients send their request (or TLS ClientHello)
// with the connection.
const probationWait = time.Second

func (l *silentLimit) Accept() (net.Conn, error) {
	l.setup()
	l.start.Do(func() { go l.loop() })
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		// A connection that finished its probation as the listener
		// closed is dropped by its goroutine.
		return nil, l.err
	}
}

// loop accepts from the wrapped listener until it fails (it is closed).
func (l *silentLimit) loop() {
	defer close(l.done)
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			l.err = err
			return
		}
		src := sourceOf(c.RemoteAddr())
		l.mu.Lock()
		under := l.silent[src] < l.perSource
		wait := !under && l.waiting[src] < l.perSource
		switch {
		case under:
			l.silent[src]++
		case wait:
			l.waiting[src]++
		}
		l.mu.Unlock()
		switch {
		case under:
			sc := &silentConn{Conn: c, l: l, src: src, firstBy: time.Now().Add(l.firstByte)}
			_ = c.SetReadDeadline(sc.firstBy)
			if !l.hand(sc) {
				return
			}
		case wait:
			go l.probe(c, src)
		default:
			_ = c.Close()
		}
	}
}

// hand gives c to Accept; false (c closed) once the listener is closed.
func (l *silentLimit) hand(c net.Conn) bool {
	select {
	case l.ready <- c:
		return true
	case <-l.closing:
		_ = c.Close()
		return false
	}
}

func (l *silentLimit) setup() {
	l.init.Do(func() {
		l.ready = make(chan net.Conn)
		l.closing = make(chan struct{})
		l.done = make(chan struct{})
		l.waiting = map[string]int{}
		if l.silent == nil {
			l.silent = map[string]int{}
		}
	})
}

// probe waits up to the probation for c's first byte, then hands c over
// with that byte in front, or closes it.
func (l *silentLimit) probe(c net.Conn, src string) {
	wait := l.probation
	if wait <= 0 {
		wait = probationWait
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	var b [1]byte
	n, _ := c.Read(b[:])
	l.mu.Lock()
	if l.waiting[src]--; l.waiting[src] <= 0 {
		delete(l.waiting, src)
	}
	l.mu.Unlock()
	if n == 0 {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	l.hand(&spokenConn{Conn: c, first: b[0], has: true})
}

func (l *silentLimit) Close() error {
	l.setup()
	l.closeOnce.Do(func() { close(l.closing) })
	return l.Listener.Close()
}

func (l *silentLimit) spoke(src string) {
	l.mu.Lock()
	if l.silent[src]--; l.silent[src] <= 0 {
		delete(l.silent, src)
	}
	l.mu.Unlock()
}

// spokenConn is a connection whose first byte was read in probation: its
// first Read returns that byte.
type spokenConn struct {
	net.Conn
	mu    sync.Mutex
	first byte
	has   bool
}

func (c *spokenConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.has && len(p) > 0 {
		p[0] = c.first
		c.has = false
		c.mu.Unlock()
		return 1, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
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
