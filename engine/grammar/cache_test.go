package grammar

import (
	"errors"
	"testing"
)

func TestCache(t *testing.T) {
	c := NewCache(2)
	a := []byte(`{"type":"string"}`)
	b := []byte(`{"type":"integer"}`)
	ga, err := c.FromSchema(a)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := c.FromSchema(a); g != ga {
		t.Fatal("the same schema compiled twice, want the cached grammar")
	}
	if _, err := c.FromSchema(b); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FromSchema([]byte(`{"type":"null"}`)); err != nil { // evicts a, the least recent
		t.Fatal(err)
	}
	if g, _ := c.FromSchema(a); g == ga {
		t.Fatal("a was least recently used and should have been evicted")
	}
	if _, err := c.FromSchema([]byte(`{"pattern":"(?=x)"}`)); !errors.Is(err, ErrUnsupportedSchema) {
		t.Fatalf("got %v, want ErrUnsupportedSchema", err)
	}
	// A grammar grown past maxSharedStates is not shared again.
	g, _ := c.FromSchema(b)
	g.mu.Lock()
	for len(g.states) <= maxSharedStates {
		g.states = append(g.states, &state{})
	}
	g.mu.Unlock()
	if g2, _ := c.FromSchema(b); g2 == g {
		t.Fatal("an oversized grammar was shared")
	}
}
