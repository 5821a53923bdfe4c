package api_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/cloison/cloison/api"
)

// Connections that send nothing cannot fill the connection cap: with a cap
// of 6, twelve silent connections from one source (127.0.0.2) leave room
// for another client's request, which is served while they are all still
// open; and a silent connection is closed by the server after FirstByte.
func TestSilentConnectionsDoNotFillTheCap(t *testing.T) {
	tr := api.Transport{MaxConns: 6, MaxSilentPerSource: 3, FirstByte: 2 * time.Second, ReadHeader: time.Minute}
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := tr.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), nil, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	silent := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range 12 {
		c, err := silent.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The request is served while the silent connections are open (the
	// client's timeout is below FirstByte: no silent one has been closed
	// by its deadline yet).
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/", nil)
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatalf("a client's request behind 12 silent connections: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, body)
	}

	// Every silent connection is closed by the server: the ones over the
	// source's share at once, the others after FirstByte.
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
			t.Fatalf("silent connection %d: read %d bytes, %v; want it closed by the server", i, n, err)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// The source's share counts connections whose first byte the server has
// not read yet, which on a busy node includes clients that sent their
// request with the connection. A connection over the share that does send
// is served, not reset: with the share held by silent connections from
// the same source, requests on new connections from it are answered, and
// the silent ones over the share are still closed.
func TestBurstOverTheSilentShareIsServed(t *testing.T) {
	tr := api.Transport{MaxConns: 64, MaxSilentPerSource: 2, FirstByte: 3 * time.Second, ReadHeader: time.Minute}
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := tr.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), nil, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}, Timeout: 5 * time.Second}
	var silent []net.Conn
	t.Cleanup(func() {
		for _, c := range silent {
			_ = c.Close()
		}
	})
	for range 2 {
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	time.Sleep(100 * time.Millisecond) // the share is taken before the burst
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("request %d on a new connection over the silent share: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("request %d: got %d %q, want 200 ok", i, resp.StatusCode, body)
		}
	}
	// Silent connections over the share are closed after the probation.
	extra, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(2500 * time.Millisecond))
	if n, err := extra.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Fatalf("silent connection over the share: read %d bytes, %v; want it closed within the probation", n, err)
	}
}
