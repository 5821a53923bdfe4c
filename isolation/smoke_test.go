package isolation

import "testing"

func TestSmoke(t *testing.T) {
	p, err := NewPool(Config{Pages: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddTenant(TenantConfig{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	l, err := p.Allocate("a", "r1", 40)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(l, 40); err != nil {
		t.Fatal(err)
	}
	bt, err := p.BlockTable(l, 40)
	if err != nil || bt.Len() != 3 {
		t.Fatal(err, bt.Len())
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(l); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}
