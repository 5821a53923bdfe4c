package grammar

// Whitespace is what a JSON grammar allows between two JSON tokens. Each
// policy bounds it, so that a model cannot spend its tokens on whitespace.
type Whitespace uint8

// Whitespace policies.
const (
	// Indent (the zero value): nothing, one space, or a newline and up to
	// 20 spaces or tabs of indentation (as llama.cpp's JSON grammar).
	Indent Whitespace = iota
	// Compact: nothing (what OpenAI's strict structured outputs produce).
	Compact
	// Space: nothing or one space (", " and ": " as Python's json.dumps).
	Space
)

// ParseWhitespace reads a policy's name: "indent", "compact" or "space".
func ParseWhitespace(s string) (Whitespace, bool) {
	switch s {
	case "indent":
		return Indent, true
	case "compact":
		return Compact, true
	case "space":
		return Space, true
	}
	return 0, false
}

func (w Whitespace) String() string {
	switch w {
	case Compact:
		return "compact"
	case Space:
		return "space"
	}
	return "indent"
}

// alts is the whitespace rule's alternatives.
func (w Whitespace) alts(b *builder) [][]elem {
	switch w {
	case Compact:
		return [][]elem{nil}
	case Space:
		return [][]elem{nil, lit(" ")}
	}
	ind := b.repeat("indent", one(terms(' ', ' ', '\t', '\t')), nil, 0, 20)
	return [][]elem{nil, lit(" "), cat(lit("\n"), one(ref(ind)))}
}

// CompileWith is Compile with the JSON whitespace policy ws (Compile's is
// Indent).
func CompileWith(p Part, ws Whitespace) (*Grammar, error) {
	b := newBuilder()
	b.space = ws
	root, err := p.emit(b)
	if err != nil {
		return nil, err
	}
	if b.tooBig {
		return nil, ErrUnsupportedSchema.Withf("the schema needs more than %d grammar rules", maxRules)
	}
	return build(b.rules, root)
}

// FromSchemaWith is FromSchema with the whitespace policy ws.
func FromSchemaWith(doc []byte, ws Whitespace) (*Grammar, error) {
	return CompileWith(Schema(doc), ws)
}
