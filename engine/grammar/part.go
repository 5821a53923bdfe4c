package grammar

// Part is a piece of a grammar: a literal, a JSON schema, any JSON object,
// or a sequence, choice or repetition of parts. Compile turns a Part into a
// Grammar. Parts let callers wrap JSON in a model family's framing, such as
// a tool call:
//
//	call := grammar.Seq(grammar.Literal("<tool_call>\n"), grammar.Schema(callSchema), grammar.Literal("\n</tool_call>"))
//	g, err := grammar.Compile(grammar.Repeat(call, "\n", 1, -1)) // one or more calls
type Part interface {
	emit(b *builder) (int, error)
}

type literalPart string

func (p literalPart) emit(b *builder) (int, error) { return b.literal(string(p)), nil }

// Literal matches exactly s (its bytes).
func Literal(s string) Part { return literalPart(s) }

type schemaPart []byte

func (p schemaPart) emit(b *builder) (int, error) { return compileSchema(b, p) }

// Schema matches JSON values that a JSON schema document accepts (the
// subset described in the package documentation; anything else makes
// Compile fail with ErrUnsupportedSchema or ErrBadSchema naming it).
func Schema(doc []byte) Part { return schemaPart(append([]byte(nil), doc...)) }

type objectPart struct{}

func (objectPart) emit(b *builder) (int, error) { return b.object(), nil }

// AnyObject matches any JSON object (response_format json_object).
func AnyObject() Part { return objectPart{} }

type seqPart []Part

func (p seqPart) emit(b *builder) (int, error) {
	var alt []elem
	for _, x := range p {
		r, err := x.emit(b)
		if err != nil {
			return 0, err
		}
		alt = append(alt, ref(r))
	}
	return b.add("seq", alt), nil
}

// Seq matches its parts one after another.
func Seq(parts ...Part) Part { return seqPart(parts) }

type choicePart []Part

func (p choicePart) emit(b *builder) (int, error) {
	if len(p) == 0 {
		return 0, ErrBadSchema.Withf("a choice of no parts")
	}
	var alts [][]elem
	for _, x := range p {
		r, err := x.emit(b)
		if err != nil {
			return 0, err
		}
		alts = append(alts, one(ref(r)))
	}
	return b.add("choice", alts...), nil
}

// Choice matches any one of its parts.
func Choice(parts ...Part) Part { return choicePart(parts) }

type repeatPart struct {
	p        Part
	sep      string
	min, max int
}

func (p repeatPart) emit(b *builder) (int, error) {
	if p.min < 0 || (p.max >= 0 && p.max < p.min) || p.min > maxRepeat || p.max > maxRepeat {
		return 0, ErrBadSchema.Withf("repeat bounds %d..%d", p.min, p.max)
	}
	r, err := p.p.emit(b)
	if err != nil {
		return 0, err
	}
	return b.repeat("repeat", one(ref(r)), lit(p.sep), p.min, p.max), nil
}

// Repeat matches p from min to max times (max < 0: no bound), with the
// literal sep between two.
func Repeat(p Part, sep string, min, max int) Part { return repeatPart{p, sep, min, max} }

// Compile builds the grammar of p. Errors: ErrUnsupportedSchema and
// ErrBadSchema (naming the feature and its place in the schema).
func Compile(p Part) (*Grammar, error) {
	b := newBuilder()
	root, err := p.emit(b)
	if err != nil {
		return nil, err
	}
	if b.tooBig {
		return nil, ErrUnsupportedSchema.Withf("the schema needs more than %d grammar rules", maxRules)
	}
	return build(b.rules, root)
}

// FromSchema compiles a JSON schema document (response_format json_schema).
// Errors: as Compile.
func FromSchema(doc []byte) (*Grammar, error) { return Compile(Schema(doc)) }

// JSONObject returns the grammar of any JSON object (response_format
// json_object).
func JSONObject() *Grammar {
	g, err := Compile(AnyObject())
	if err != nil {
		panic(err) // a fixed grammar: cannot fail
	}
	return g
}
