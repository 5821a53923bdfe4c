package service

import (
	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/grammar"
)

// Constraint is what constrains a request's output, as decoded and not
// yet compiled: a response_format's JSON schema, or the grammar of its
// tool calls. Compiling costs what the caller sends (a large schema takes
// seconds and hundreds of megabytes), so Generate compiles it only after
// admission — the policy decision, the decision's limits and the tenant's
// quota and concurrency — while the tenant's permit is held: a tenant over
// its quota is refused without a compile, and compiles count against the
// tenant's concurrency. The zero Constraint constrains nothing.
type Constraint struct {
	// Schema is a response_format's JSON schema (json_object: any object,
	// JSONObjectSchema); nil: none.
	Schema []byte
	// Tools is a request whose tool calls a grammar constrains
	// (ToolUse.Constrained, after ToolFormat); nil: none.
	Tools *ToolUse
	// Choice is structured_outputs' choice (vLLM's guided_choice): the
	// output is exactly one of these strings; nil: none. The caller bounds
	// their number and length.
	Choice []string
	// Syntax and Grammar are a grammar written as text that the whole
	// output must match: a regular expression (structured_outputs.regex),
	// llama.cpp's GBNF or the Lark subset of OpenAI's custom tools
	// (grammar.FromText); Syntax "": none. The caller bounds its size
	// (grammar.MaxTextBytes).
	Syntax  grammar.Syntax
	Grammar string
	// Whitespace is what Schema's grammar (and a structural tag's JSON)
	// allows between JSON tokens (grammar.Whitespace; the zero value:
	// Indent).
	Whitespace grammar.Whitespace
	// After is the marker that ends a reasoning model's reasoning where the
	// prompt opened it ("</think>"): the output is free text up to it, the
	// grammar holds from the byte after it (grammar.After); "": from the
	// first token.
	After string
}

// JSONObjectSchema is the schema of response_format json_object: any JSON
// object.
var JSONObjectSchema = []byte(`{"type":"object"}`)

// IsZero reports whether c constrains nothing.
func (c Constraint) IsZero() bool {
	return c.Schema == nil && c.Tools == nil && c.Choice == nil && c.Syntax == ""
}

// compile is c's grammar for tenant t: a schema and a grammar written as
// text through the node's grammar cache (t's entries, within t's share of
// its byte budget), tool calls and a choice compiled for the request.
// Errors: grammar.ErrUnsupportedSchema and grammar.ErrBadSchema naming
// the feature; grammar.ErrBadGrammar and grammar.ErrUnsupportedGrammar
// likewise; ErrUnsupported (a tool-call format that cannot be forced).
func (s *Requests) compile(t cloison.TenantID, c Constraint) (*grammar.Grammar, error) {
	g, err := s.compileOutput(t, c)
	if err != nil || g == nil || c.After == "" {
		return g, err
	}
	return grammar.After(c.After, g, []string{thinkOpen, thinkClose})
}

// compileOutput is c's grammar of the constrained output itself.
func (s *Requests) compileOutput(t cloison.TenantID, c Constraint) (*grammar.Grammar, error) {
	if c.IsZero() {
		return nil, nil
	}
	switch {
	case c.Tools != nil:
		return c.Tools.Grammar()
	case c.Choice != nil:
		parts := make([]grammar.Part, len(c.Choice))
		for i, v := range c.Choice {
			parts[i] = grammar.Literal(v)
		}
		return grammar.Compile(grammar.Choice(parts...))
	case c.Syntax == grammar.StructuralTag:
		return s.grammars.StructuralTagWith(string(t), c.Grammar, c.Whitespace)
	case c.Syntax != "":
		return s.grammars.FromText(string(t), c.Syntax, c.Grammar)
	}
	return s.grammars.FromSchemaWith(string(t), c.Schema, c.Whitespace)
}

// Grammars is the node's cache of compiled response_format grammars
// (Config.GrammarBytes), for its metrics.
func (s *Requests) Grammars() *grammar.Cache { return s.grammars }
