package isolation

import (
	"fmt"
	"testing"
)

// BenchmarkAllocateRelease16 measures a 16-page lease allocated and released,
// the cross-tenant default mode, one tenant (its freed pages come back to it
// without a scrub). Aim: ≥ 10 M page allocations+frees per second per core.
func BenchmarkAllocateRelease16(b *testing.B) {
	p := newPool(b, Config{Pages: 4096, PageTokens: 16}, TenantConfig{ID: "a"})
	b.ReportAllocs()
	for b.Loop() {
		l, err := p.Allocate("a", "r", 16*16)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Release(l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*16/b.Elapsed().Seconds(), "pages/s")
}

// BenchmarkBlockTable builds and checks the block table of a fully written
// lease. Aim: < 5 ns per page.
func BenchmarkBlockTable(b *testing.B) {
	for _, tokens := range []int{4096, 32768} {
		b.Run(fmt.Sprintf("tokens=%d", tokens), func(b *testing.B) {
			p := newPool(b, Config{Pages: 4096, PageTokens: 16}, TenantConfig{ID: "a"})
			l, err := p.Allocate("a", "r", tokens)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Write(l, tokens); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.BlockTable(l, tokens); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(tokens/16), "ns/page")
		})
	}
}

// BenchmarkPrefixLookup allocates a lease whose 1,024-token prompt is cached.
func BenchmarkPrefixLookup(b *testing.B) {
	p := newPool(b, Config{Pages: 4096, PageTokens: 16}, TenantConfig{ID: "a"})
	prompt := seq(1024, 0)
	l, _, _ := p.AllocatePrefix("a", "r", 1100, prompt)
	p.Write(l, 1024)
	p.Publish(l, prompt)
	b.ReportAllocs()
	for b.Loop() {
		l2, cached, err := p.AllocatePrefix("a", "r2", 1100, prompt)
		if err != nil || cached != 1008 {
			b.Fatal(cached, err)
		}
		p.Release(l2)
	}
}
