package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
)

// servedLogPlatform is a platform whose ledger holds n more entries: the
// tenants' requests (alpha, bravo) and, every fifth, a public deployment
// fact (capacity.attestation, naming no tenant); then a tree note.
func servedLogPlatform(t testing.TB, p *platformtest.Platform, from, n int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := from; i < from+n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ev := audit.Event{OccurredAt: time.Now(), Tenant: []cloison.TenantID{"alpha", "bravo"}[i%2], Actor: "engine:served-log",
				Payload: audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("req-%d", i)), Model: "m", PromptTokens: int64(i),
					CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}
			if i%5 == 0 {
				ev = audit.Event{OccurredAt: time.Now(), Actor: "node:served-log",
					Payload: audit.CapacityAttestation{Node: "n1", Model: "m", AdvertisedContext: int64(i), ServableContext: int64(i), PoolPages: 8, PageTokens: 16, Ready: true}}
			}
			_, err := p.Ledger.Append(ctx, ev)
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
}

// fetchCheckpoint reads /log/checkpoint without a token and opens it with
// the published verifier key alone (note, torchwood).
func fetchCheckpoint(t *testing.T, url, vkey string) (torchwood.Checkpoint, []byte) {
	t.Helper()
	resp, err := http.Get(url + "/log/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("checkpoint: got %d %q %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), buf.Bytes())
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(buf.Bytes(), note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	c, err := torchwood.ParseCheckpoint(n.Text)
	if err != nil || c.Origin != v.Name() {
		t.Fatalf("checkpoint %q: %v", n.Text, err)
	}
	return c, buf.Bytes()
}

// monitorCut is a monitor's reading of a served entry (docs/ledger.md,
// "The served log"), written here without Cloison's code: a 32-byte entry
// is the leaf hash itself, any other is the leaf's preimage.
func monitorCut(tile []byte) ([]byte, tlog.Hash, []byte, error) {
	entry, rest, err := torchwood.ReadTileEntry(tile)
	if err != nil {
		return nil, tlog.Hash{}, nil, err
	}
	if len(entry) == tlog.HashSize {
		var h tlog.Hash
		copy(h[:], entry)
		return entry, h, rest, nil
	}
	return entry, tlog.RecordHash(entry), rest, nil
}

// An off-the-shelf tile client (filippo.io/torchwood, with tlog) follows
// the served log without a token: it verifies the checkpoint with the
// published key, every entry of every bundle against the tree, inclusion
// and consistency from tiles alone; public entries are the ledger's
// payloads, tenants' are their leaf hashes, and no bundle names a tenant.
func TestServedLogVerifiesWithTileClient(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	ctx := context.Background()
	servedLogPlatform(t, p, 0, 40)
	vkey, err := p.Ledger.TreeVerifierKey() // published out of band
	if err != nil {
		t.Fatal(err)
	}
	old, _ := fetchCheckpoint(t, p.URL, vkey)
	servedLogPlatform(t, p, 40, 300) // past a full tile
	cp, _ := fetchCheckpoint(t, p.URL, vkey)
	if cp.N <= 256 || cp.N <= old.N {
		t.Fatalf("tree sizes %d then %d: want the second past one full tile", old.N, cp.N)
	}

	fetcher, err := torchwood.NewTileFetcher(p.URL + "/log/")
	if err != nil {
		t.Fatal(err)
	}
	// Consistency and inclusion from tiles, each tile checked against the
	// signed tree (tlog.TileHashReader through torchwood).
	hr := torchwood.TileHashReaderWithContext(ctx, cp.Tree, fetcher)
	proof, err := tlog.ProveTree(cp.N, old.N, hr)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(proof, cp.N, cp.Hash, old.N, old.Hash); err != nil {
		t.Fatalf("consistency %d → %d: %v", old.N, cp.N, err)
	}

	// Every entry, through the client with a monitor's reading.
	want := map[int64]audit.Record{}
	if err := p.Ledger.Scan(ctx, 1, uint64(cp.N), func(r audit.Record) error { want[int64(r.Seq)-1] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	client, err := torchwood.NewClient(fetcher, torchwood.WithCutEntry(monitorCut))
	if err != nil {
		t.Fatal(err)
	}
	var public, hashed int
	var publicIndex, tenantIndex int64 = -1, -1
	for next := int64(0); next < cp.N; {
		before := next
		for i, e := range client.Entries(ctx, cp.Tree, next) {
			r := want[i]
			switch {
			case audit.ServedPublic(r):
				public++
				publicIndex = i
				if !bytes.Equal(e, r.Payload) {
					t.Fatalf("entry %d: got %q, want the payload", i, e)
				}
			default:
				hashed++
				if lh := audit.LeafHash(r); !bytes.Equal(e, lh[:]) {
					t.Fatalf("entry %d: got %x, want its leaf hash", i, e)
				}
				if tenantIndex < 0 && r.Seq > 10 {
					tenantIndex = i
				}
			}
			for _, name := range []string{"alpha", "bravo", "req-"} {
				if bytes.Contains(e, []byte(name)) {
					t.Fatalf("entry %d names %q: %q", i, name, e)
				}
			}
			next = i + 1
		}
		if err := client.Err(); err != nil {
			t.Fatalf("client: %v", err)
		}
		if next == before {
			t.Fatalf("client stopped at %d of %d", next, cp.N)
		}
	}
	if public == 0 || hashed == 0 || public+hashed != int(cp.N) {
		t.Fatalf("%d public and %d hashed entries of %d", public, hashed, cp.N)
	}

	// The client as shipped (payloads only): a public entry verifies with
	// its inclusion proof, a tenant's hash is not a preimage and fails.
	plain, err := torchwood.NewClient(fetcher)
	if err != nil {
		t.Fatal(err)
	}
	e, rp, err := plain.Entry(ctx, cp.Tree, publicIndex)
	if err != nil || !bytes.Equal(e, want[publicIndex].Payload) {
		t.Fatalf("public entry %d: %v", publicIndex, err)
	}
	if err := tlog.CheckRecord(rp, cp.N, cp.Hash, publicIndex, tlog.RecordHash(e)); err != nil {
		t.Fatalf("inclusion of %d: %v", publicIndex, err)
	}
	if _, _, err := plain.Entry(ctx, cp.Tree, tenantIndex); err == nil {
		t.Fatalf("a tenant's entry %d verified as a payload", tenantIndex)
	}
}

// The served resources' paths, headers and refusals: full tiles and
// bundles immutable, partial ones too (the bytes at a path never change),
// a non-canonical or absent path 404, no token needed.
func TestServedLogPaths(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}})
	servedLogPlatform(t, p, 0, 270)
	size, err := p.Ledger.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := fmt.Sprint(size.Seq - 256)
	tests := []struct {
		path  string
		code  int
		bytes int
	}{
		{"/log/tile/0/000", 200, 256 * 32},
		{"/log/tile/0/001.p/" + w, 200, int(size.Seq-256) * 32},
		{"/log/tile/0/001.p/1", 200, 32},
		{"/log/tile/1/000.p/1", 200, 32},
		{"/log/tile/entries/000", 200, -1},
		{"/log/tile/entries/001.p/" + w, 200, -1},
		{"/log/tile/0/0", 404, 0},
		{"/log/tile/0/000.p/256", 404, 0},
		{"/log/tile/0/000.p/0", 404, 0},
		{"/log/tile/00/000", 404, 0},
		{"/log/tile/64/000", 404, 0},
		{"/log/tile/0/001", 404, 0},
		{"/log/tile/0/002.p/1", 404, 0},
		{"/log/tile/0/001.p/255", 404, 0},
		{"/log/tile/entries/001", 404, 0},
		{"/log/tile/entries/x001/000", 404, 0},
		{"/log/tile/entries", 404, 0},
	}
	// Uncompressed, a bundle holds exactly its width's entries.
	req, _ := http.NewRequest("GET", p.URL+"/log/tile/entries/001.p/"+w, nil)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("identity asked, got %q", resp.Header.Get("Content-Encoding"))
	}
	n := 0
	for rest := raw.Bytes(); len(rest) > 0; n++ {
		if _, _, rest, err = audit.CutServedEntry(rest); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(n) != w {
		t.Fatalf("bundle of width %s holds %d entries", w, n)
	}
	for _, tc := range tests {
		t.Run(strings.TrimPrefix(tc.path, "/log/"), func(t *testing.T) {
			resp, err := http.Get(p.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, buf.Bytes(), tc.code)
			}
			if tc.code != 200 {
				return
			}
			if tc.bytes >= 0 && buf.Len() != tc.bytes {
				t.Errorf("got %d bytes, want %d", buf.Len(), tc.bytes)
			}
			if got := resp.Header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
				t.Errorf("Cache-Control %q", got)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/octet-stream" {
				t.Errorf("Content-Type %q", got)
			}
		})
	}
	// Every request is counted, by resource and outcome.
	rec := httptest.NewRecorder()
	p.Server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{`cloison_log_requests_total{model_name="`, `outcome="not_found",resource="tile"} 9`, `outcome="not_found",resource="entries"} 2`, `outcome="served",resource="entries"} 3`} {
		if !strings.Contains(rec.Body.String(), line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// The cost of the served log's reads: a full entry bundle and a full tile
// built from the database (what a cache miss costs), and a full bundle
// over HTTP, served from the routes' cache after the first read.
func BenchmarkServedLog(b *testing.B) {
	p := platformtest.New(b, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	servedLogPlatform(b, p, 0, 300)
	ctx := context.Background()
	b.Run("bundle-db", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.Ledger.EntryBundle(ctx, 0, 256); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tile-db", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.Ledger.Tile(ctx, 0, 0, 256); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bundle-http-cached", func(b *testing.B) {
		for b.Loop() {
			resp, err := http.Get(p.URL + "/log/tile/entries/000")
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
