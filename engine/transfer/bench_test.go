package transfer

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// The page-digest candidates on one 1 MiB page (a llama-8B-like page of 8
// layers' share: the figures and the choice of BLAKE3 are in doc.go).
func BenchmarkPageDigest(b *testing.B) {
	page := make([]byte, 1<<20)
	for i := range page {
		page[i] = byte(i * 7)
	}
	for _, h := range []struct {
		name string
		fn   func([]byte)
	}{
		{"sha256", func(p []byte) { sha256.Sum256(p) }},
		{"sha512-256", func(p []byte) { sha512.Sum512_256(p) }},
		{"blake3", func(p []byte) { PageDigest(p) }},
	} {
		b.Run(h.name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				h.fn(page)
			}
		})
	}
}

// benchLayout: pages of 1 MiB (8 layers × K,V × 16 tokens × 8 kv heads × 128).
var benchLayout = kernels.ArenaConfig{Pages: 64, PageTokens: 16, Layers: 8, KVHeads: 8, HeadDim: 128}

// filledLease writes random KV for tokens positions of a fresh lease.
func filledLease(b testing.TB, be kernels.Backend, n *node, tokens int) isolation.Lease {
	l, err := n.pool.Allocate("a", "prefill", tokens)
	if err != nil {
		b.Fatal(err)
	}
	if err := n.pool.Write(l, tokens); err != nil {
		b.Fatal(err)
	}
	bt, err := n.pool.BlockTable(l, tokens)
	if err != nil {
		b.Fatal(err)
	}
	c := n.arena.Config()
	row := c.KVHeads * c.HeadDim
	k, _ := be.NewTensor(tokens, row)
	v, _ := be.NewTensor(tokens, row)
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]float32, tokens*row)
	for layer := range c.Layers {
		for i := range buf {
			buf[i] = r.Float32()
		}
		be.Upload(k, buf)
		be.Upload(v, buf)
		if err := n.arena.WriteKV(layer, k, v, []kernels.Span{{Table: bt, N: tokens}}); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// BenchmarkTransfer moves 64 MiB (1024 tokens) per operation from a prefill
// node to a decode node and reports GB/s and the verification share on the
// receiver, as percentages of the transfer's time there (header to commit):
// verify-cpu-% is the CPU time of hashing, digest comparisons and MAC checks
// (mostly beside the receiving loop), verify-wait-% the time verification
// added to the transfer (backpressure, last pages, MACs).
func BenchmarkTransfer(b *testing.B) {
	be, err := cpu.New(kernels.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	keys, _ := keyRing(b, "k1")
	prefill := newNode(b, be, benchLayout, "a")
	decode := newNode(b, be, benchLayout, "a")
	tokens := benchLayout.Pages * benchLayout.PageTokens
	from := filledLease(b, be, prefill, tokens)
	s, err := NewSender(SenderConfig{Pool: prefill.pool, Arena: prefill.arena, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewReceiver(ReceiverConfig{Pool: decode.pool, Arena: decode.arena, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	c := serveGRPC(b, r)
	for _, tr := range []struct {
		name string
		d    Dialer
	}{
		{"grpc-mtls", c.dial(b, c.ca)},
		{"local", Local(r, 0)},
	} {
		b.Run(tr.name, func(b *testing.B) {
			b.SetBytes(int64(tokens / benchLayout.PageTokens * LayoutOf(benchLayout).PageBytes()))
			var verify, wait, elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				dl, err := decode.pool.Allocate("a", from.Request, tokens)
				if err != nil {
					b.Fatal(err)
				}
				tk, err := r.Expect(dl, tokens)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				errc := make(chan error, 1)
				go func() {
					_, err := s.Send(context.Background(), tr.d, from, tk.Target())
					errc <- err
				}()
				if err := <-errc; err != nil {
					tk.Cancel()
					b.Fatal(err)
				}
				res, err := tk.Wait(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				verify += res.Verify
				wait += res.VerifyWait
				elapsed += res.Elapsed
				decode.pool.Release(dl)
				decode.pool.ConfirmScrub(decode.pool.ScrubWork())
				b.StartTimer()
			}
			b.ReportMetric(100*float64(verify)/float64(elapsed), "verify-cpu-%")
			b.ReportMetric(100*float64(wait)/float64(elapsed), "verify-wait-%")
		})
	}
}
