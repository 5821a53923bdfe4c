package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/tenancy"
)

// On SIGTERM /readyz turns 503 at once, the listener keeps
// serving for --drain-period (a request routed meanwhile gets its 200),
// a stream begun before the signal finishes whole, and only then does the
// process exit (status 0). Without drain.go the listener closed at the
// signal: the request during the period was refused and /readyz never
// said 503.
func TestE2EDrainOnSIGTERM(t *testing.T) {
	tdb := pgtest.New(t)
	const period = 3 * time.Second
	n := startNode(t, tdb.AdminURL, pgtestRoles(), "--drain-period", period.String())
	createTenant(t, tdb.AdminURL, "acme", nil)
	tok := n.token("acme", time.Minute, tenancy.ScopeInfer)

	req, _ := http.NewRequest("POST", n.base+"/v1/completions", bytes.NewReader(completion("a stream across the signal", 200, true)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: got %d %s, want 200", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("first event: %q, %v", first, err)
	}

	sent := time.Now()
	if err := n.cmd.Process.Signal(os.Interrupt); err != nil { // SIGINT and SIGTERM are handled alike
		t.Fatal(err)
	}
	// Not ready at once: the first probe after the signal may still race
	// it, so allow a few hundred milliseconds.
	testwait.Eventually(t, time.Second, func() bool { return n.do("GET", "/readyz", "", nil).status == 503 }, "/readyz 503")
	if d := time.Since(sent); d > time.Second {
		t.Fatalf("/readyz turned 503 after %v, want at once", d)
	}
	// Still serving during the drain period.
	if r := n.do("POST", "/v1/completions", tok, completion("routed before the balancer noticed", 4, false)); r.status != 200 {
		t.Fatalf("request during the drain: got %d %s, want 200", r.status, r.body)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("stream cut: %v", err)
	}
	texts, finish, done, code := sse(t, append([]byte(first), rest...))
	if !done || code != "" || finish == "" || len(texts) == 0 {
		t.Fatalf("stream across the signal: done %v, finish %q, error %q, %d events; want it whole", done, finish, code, len(texts))
	}
	select {
	case err := <-n.done:
		n.done <- err // for n.stop
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, n.logs)
		}
		if d := time.Since(sent); d < period {
			t.Fatalf("exited %v after the signal, before the %v drain period", d, period)
		}
	case <-time.After(period + 20*time.Second):
		t.Fatalf("did not exit after the drain\n%s", n.logs)
	}
}
