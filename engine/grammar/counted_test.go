package grammar

import (
	"fmt"
	"testing"
)

// TestCountedChunkRecognized: at every character boundary of a bounded
// string the chunk is recognized as one (countedChunk) with the characters
// still allowed and still needed, so its mask derives from the count-free
// walk; inside a character (an escape begun) it is not.
func TestCountedChunkRecognized(t *testing.T) {
	for _, b := range [][2]int{{0, 3}, {2, 5}, {3, 3}, {2, -1}, {1, 1}} {
		schema := fmt.Sprintf(`{"type":"string","minLength":%d}`, b[0])
		if b[1] >= 0 {
			schema = fmt.Sprintf(`{"type":"string","minLength":%d,"maxLength":%d}`, b[0], b[1])
		}
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		st := g.trans(g.start(), '"')
		for n := 0; b[1] < 0 || n < b[1]; n++ {
			if n > 8 {
				break
			}
			var r, m, chars int
			ok := true
			for _, s := range g.states[st].stacks {
				if s == nil || s.next == nil {
					continue // the end, the closing quote
				}
				chunk, _ := g.cut(s)
				var k bool
				_, r, m, k = g.countedChunk(chunk)
				ok = ok && k
				chars++
			}
			ok = ok && chars > 0
			wantR := b[1] - n
			if b[1] < 0 {
				wantR = -1
			}
			if !ok || r != wantR || m != max(b[0]-n, 0) {
				t.Fatalf("%s after %d characters: countedChunk = %d, %d, %v; want %d, %d, true", schema, n, r, m, ok, wantR, max(b[0]-n, 0))
			}
			if esc := g.trans(st, '\\'); esc >= 0 {
				c, _ := g.cut(g.states[esc].stacks[0])
				if _, _, _, ok := g.countedChunk(c); ok {
					t.Fatalf("%s: a chunk inside an escape read as a boundary", schema)
				}
			}
			st = g.trans(st, 'a')
		}
	}
}
