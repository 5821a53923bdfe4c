package grammar

import (
	"errors"
	"fmt"
	"testing"
)

func TestCache(t *testing.T) {
	c := NewCache(1 << 30)
	a := []byte(`{"type":"string"}`)
	b := []byte(`{"type":"integer"}`)
	ga, err := c.FromSchema("t", a)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := c.FromSchema("t", a); g != ga {
		t.Fatal("the same schema compiled twice, want the cached grammar")
	}
	// Owners never share an entry.
	if g, _ := c.FromSchema("u", a); g == ga {
		t.Fatal("another owner got t's grammar")
	}
	if _, err := c.FromSchema("t", []byte(`{"pattern":"(?=x)"}`)); !errors.Is(err, ErrUnsupportedSchema) {
		t.Fatalf("got %v, want ErrUnsupportedSchema", err)
	}
	if s := c.Stats(); s.Hits != 1 || s.Compiles != 3 || s.Entries != 2 || s.Owners != 2 {
		t.Fatalf("stats %+v, want 1 hit, 3 compiles, 2 entries of 2 owners", s)
	}
	// A grammar grown past maxSharedStates is not shared again.
	g, _ := c.FromSchema("t", b)
	g.mu.Lock()
	for len(g.states) <= maxSharedStates {
		g.states = append(g.states, &state{})
	}
	g.mu.Unlock()
	if g2, _ := c.FromSchema("t", b); g2 == g {
		t.Fatal("an oversized grammar was shared")
	}
}

// schemaN is a distinct schema of some hundred properties.
func schemaN(i, props int) []byte {
	s := `{"type":"object","properties":{`
	for p := range props {
		if p > 0 {
			s += ","
		}
		s += fmt.Sprintf(`"k%d_%d":{"type":"string","maxLength":%d}`, i, p, 8+p%5)
	}
	return []byte(s + `}}`)
}

// One owner filling the cache evicts its own entries, never another
// owner's warm grammar within that owner's share; the total stays within
// the budget after every request.
func TestCacheBudgetPerOwner(t *testing.T) {
	one, err := FromSchema(schemaN(0, 100))
	if err != nil {
		t.Fatal(err)
	}
	size := one.Bytes()
	budget := 8 * size // four of each owner's entries fit its half
	c := NewCache(budget)
	warm, err := c.FromSchema("victim", schemaN(0, 100))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 64; i++ {
		if _, err := c.FromSchema("noisy", schemaN(i, 100)); err != nil {
			t.Fatal(err)
		}
		if s := c.Stats(); s.Bytes > budget {
			t.Fatalf("after %d schemas: %d bytes held, budget %d", i, s.Bytes, budget)
		}
	}
	if g, _ := c.FromSchema("victim", schemaN(0, 100)); g != warm {
		t.Fatal("the victim's warm grammar was evicted by another owner")
	}
	s := c.Stats()
	if s.Evictions == 0 || c.OwnerBytes("noisy") > budget-c.OwnerBytes("victim") {
		t.Fatalf("stats %+v, noisy holds %d: want noisy evicting its own entries", s, c.OwnerBytes("noisy"))
	}
	// An owner over its share after a new owner arrives gives way to it.
	for i := 65; i < 70; i++ {
		if _, err := c.FromSchema("third", schemaN(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if c.OwnerBytes("third") == 0 || c.Stats().Bytes > budget {
		t.Fatalf("third holds %d, total %d of %d", c.OwnerBytes("third"), c.Stats().Bytes, budget)
	}
	// A grammar larger than the whole budget is returned, not kept.
	small := NewCache(size / 2)
	if g, err := small.FromSchema("t", schemaN(0, 100)); err != nil || g == nil {
		t.Fatalf("got %v, %v", g, err)
	}
	if s := small.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("stats %+v, want nothing kept", s)
	}
}
