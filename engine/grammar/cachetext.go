package grammar

import "crypto/sha256"

// FromSchemaWith is Cache.FromSchema with the whitespace policy ws (a
// schema under two policies is two entries).
func (c *Cache) FromSchemaWith(owner string, doc []byte, ws Whitespace) (*Grammar, error) {
	if ws == Indent {
		return c.FromSchema(owner, doc)
	}
	// A NUL never begins a JSON document: the keys of the policies differ
	// from every plain schema's.
	key := sha256.Sum256(append([]byte("\x00ws:"+ws.String()+"\x00"), doc...))
	return c.get(owner, key, func() (*Grammar, error) { return FromSchemaWith(doc, ws) })
}

// FromText is FromText through owner's entries of the cache (the same
// byte budget and fair shares as schemas). Errors: as FromText.
func (c *Cache) FromText(owner string, syntax Syntax, src string) (*Grammar, error) {
	key := sha256.Sum256([]byte("\x00text:" + string(syntax) + "\x00" + src))
	return c.get(owner, key, func() (*Grammar, error) { return FromText(syntax, src) })
}

// StructuralTagWith is StructuralTagWith through owner's entries of the
// cache. Errors: as FromText.
func (c *Cache) StructuralTagWith(owner string, src string, ws Whitespace) (*Grammar, error) {
	if ws == Indent {
		return c.FromText(owner, StructuralTag, src)
	}
	key := sha256.Sum256([]byte("\x00tagws:" + ws.String() + "\x00" + src))
	return c.get(owner, key, func() (*Grammar, error) { return StructuralTagWith(src, ws) })
}
