package api

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
)

// serveTransport serves h with tr's limits on loopback and returns the
// address.
func serveTransport(t *testing.T, tr Transport, h http.Handler) string {
	t.Helper()
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := tr.HTTPServer(h, nil, nil)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// closedWithin reports whether the server closes c (EOF or reset) within
// limit, reading and discarding whatever it sends.
func closedWithin(c net.Conn, limit time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// A keep-alive connection that went idle, and one that never sends a
// request, are closed after the configured limits, so that idle clients cannot
// exhaust connections (with only ReadHeaderTimeout, an idle keep-alive
// connection was held forever).
func TestIdleConnectionsClosed(t *testing.T) {
	addr := serveTransport(t, Transport{Idle: 200 * time.Millisecond, ReadHeader: 200 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	tests := []struct {
		name    string
		request bool
	}{
		{"idle after a keep-alive request", true},
		{"silent from the start", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tt.request {
				fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.Close {
					t.Fatalf("got Connection: close, want a keep-alive connection")
				}
			}
			if !closedWithin(c, 10*time.Second) {
				t.Fatalf("got the connection still open, want it closed after the idle limit")
			}
		})
	}
}

// A client that dribbles a request body is cut once the read limit has
// passed, long before it would have finished (before: held as long as it
// kept dribbling).
func TestSlowBodyCut(t *testing.T) {
	addr := serveTransport(t, Transport{Read: 300 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				w.WriteHeader(http.StatusRequestTimeout)
				return
			}
			_, _ = io.WriteString(w, "read it all")
		}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 400 // bytes at one per 25 ms: 10 s of dribbling
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c)
		done <- string(b)
	}()
	sent := 0
	for ; sent < size; sent++ {
		select {
		case got := <-done:
			if strings.Contains(got, "read it all") {
				t.Fatalf("got the whole body read, want it cut")
			}
			return // cut before the body was complete
		case <-time.After(25 * time.Millisecond):
		}
		if _, err := c.Write([]byte("x")); err != nil {
			return // the server closed the connection
		}
	}
	t.Fatalf("got all %d bytes dribbled without a cut, want the connection cut after the read limit", sent)
}

// A stream that keeps writing is never cut, though it lasts many times the
// write limit and the read limit (the write deadline moves with each
// chunk; the read deadline is cleared once the body is read, so that the
// server's background read does not cancel the request).
func TestStreamInProgressNotCut(t *testing.T) {
	const chunks = 20
	addr := serveTransport(t, Transport{Write: 150 * time.Millisecond, Read: 150 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			for i := 0; i < chunks; i++ {
				if r.Context().Err() != nil {
					return
				}
				fmt.Fprintf(w, "data: %d\n\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(40 * time.Millisecond)
			}
		}))
	resp, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("got %v after %q, want the whole stream", err, b)
	}
	if got := strings.Count(string(b), "data: "); got != chunks {
		t.Fatalf("got %d chunks, want %d", got, chunks)
	}
}

// A client that stops reading a response is cut once one write has made no
// progress for the write limit (before: the handler blocked forever).
func TestStalledReaderCut(t *testing.T) {
	writeErr := make(chan error, 1)
	addr := serveTransport(t, Transport{Write: 200 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(strings.Repeat("x", 64<<10))
			for {
				if _, err := w.Write(chunk); err != nil {
					writeErr <- err
					return
				}
				w.(http.Flusher).Flush()
			}
		}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case <-writeErr:
	case <-time.After(20 * time.Second):
		t.Fatal("got the handler still writing, want its write cut")
	}
}

// At most MaxConns connections are served at once; the next is served when
// one closes.
func TestConnectionCap(t *testing.T) {
	entered := make(chan string, 4)
	release := make(chan struct{})
	addr := serveTransport(t, Transport{MaxConns: 1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.Path
		<-release
	}))
	a, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(a, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	if got := <-entered; got != "/a" {
		t.Fatalf("got %s, want /a", got)
	}
	b, err := net.Dial("tcp", addr) // accepted by the kernel, not by the server
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fmt.Fprint(b, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case got := <-entered:
		t.Fatalf("got %s served while /a holds the only connection, want it to wait", got)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	a.Close()
	if got := <-entered; got != "/b" {
		t.Fatalf("got %s, want /b once /a closed", got)
	}
}

// The stream gate bounds generations in flight in total (503) and per
// tenant (429), with Retry-After; a release frees the slot, once.
func TestStreamGate(t *testing.T) {
	g := &streamGate{total: 3, perTenant: 2}
	var releases []func()
	steps := []struct {
		tenant cloison.TenantID
		want   error
	}{
		{"a", nil}, {"a", nil}, {"a", ErrTenantStreams}, {"b", nil}, {"c", ErrTooManyStreams},
	}
	for i, s := range steps {
		rel, err := g.acquire(s.tenant)
		if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("step %d (%s): got %v, want %v", i, s.tenant, err, s.want)
		}
		if err == nil {
			releases = append(releases, rel)
		}
	}
	for _, c := range []struct {
		err    error
		status int
	}{{gateError{ErrTooManyStreams}, 503}, {gateError{ErrTenantStreams}, 429}} {
		rec := httptest.NewRecorder()
		WriteHTTPError(rec, c.err)
		if rec.Code != c.status || rec.Header().Get("Retry-After") != "1" {
			t.Fatalf("got %d Retry-After %q, want %d with Retry-After 1", rec.Code, rec.Header().Get("Retry-After"), c.status)
		}
	}
	releases[0]()
	releases[0]() // a second release frees nothing more
	if _, err := g.acquire("c"); err != nil {
		t.Fatalf("after a release: got %v, want a slot", err)
	}
	if _, err := g.acquire("d"); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("got %v, want ErrTooManyStreams (a double release must not free two slots)", err)
	}
}
