// Package grammar is constrained decoding: a JSON schema (or any JSON
// object, or literal framing around either) compiled into a context-free
// grammar over bytes, and a Matcher that says, before each sampling step,
// which tokens of the model's vocabulary may come next. The sampler drops
// every other token (sample.Constraint), so even a random-weight model
// produces text the grammar accepts.
//
// # What it guarantees
//
//   - Soundness: every token the mask allows keeps the text a prefix of a
//     sentence of the grammar; an end-of-generation token is allowed only
//     once the text is a whole sentence. Every sentence of a schema's
//     grammar is valid JSON that validates against the schema (property
//     tests check both, against brute force and against the
//     santhosh-tekuri/jsonschema validator).
//   - Determinism and batch invariance: a Matcher depends only on its
//     grammar and on the tokens it accepted. The mask cache memoizes a
//     pure function, so sharing it changes speed, never a mask.
//   - Fail closed: a schema feature it cannot enforce is refused
//     (ErrUnsupportedSchema naming the keyword and its place, e.g.
//     `keyword "not" at #/properties/a`), never relaxed; a token the
//     grammar does not allow is refused by Accept (ErrNotAllowed).
//
// # Schemas
//
// Enforced: type (string, number, integer, boolean, null, object, array,
// or a list of them); object properties, required, additionalProperties
// (false: declared properties only; absent, true or a schema: members of
// undeclared keys may stand before, between and after the declared ones,
// their key walked through a trie of the declared names so that it can
// never spell one — no escape while it still could — and their value any
// value or that schema; declared names outside printable ASCII fall back to
// declared properties only). An object takes its declared properties in
// any order, each at most once, the required ones always, at any size: its
// rules are grown (one per set of properties written, made the first time
// a parse reaches it and kept by the Grammar, at most maxGrown of them),
// so an object of n properties costs rules for the orders written, never
// 2^n; minProperties counts declared properties, maxProperties every
// member. dependentRequired and draft-04..07 dependencies with arrays
// (when a is present, b… are too) and not with required alone (not all
// of them present; and an object) are checked on the set written; a
// transition is kept only where the object can still be completed, so a
// parse never reaches a dead end. A name such a rule cites that properties
// does not declare is decided when additionalProperties is false (it never
// comes) and refused otherwise. A schema without type admits every type,
// each keyword constraining only its own ({"properties":…} admits a
// string).
// patternProperties: a member's key may be a sentence of a pattern (its
// regular grammar), its value then valid for every pattern's schema its
// key may also match (patterns anchored at the start whose first
// characters differ match no key together) and for each declared
// property's schema whose name the pattern matches; a
// declared property a pattern matches carries both schemas; undeclared
// keys, where allowed, carry additionalProperties and every pattern's
// schema; a member whose merged schema cannot be enforced is refused
// (never left out). Array items, minItems, maxItems; string minLength, maxLength (in
// characters; a maxLength above 1024 generates strings of up to 1024);
// pattern and format (below); integer minimum, maximum and both exclusive
// forms (draft-04 booleans, draft-06 numbers, fractional bounds rounded
// exactly), compiled to exact digit-class automata per digit length, so
// zod's safe-integer bounds (±9007199254740991) are exact; number minimum,
// maximum and both exclusive forms, whole or fractional (numrange.go: the
// bounds moved onto the 10^-16 grid, a lower one up and an upper one down,
// an exclusive one a step inside; then the integer part a digit-class range
// and the fraction digits compared with the bound's digit by digit; no
// exponent, at most 16 fraction digits, so every accepted spelling is in
// range and every in-range value of that precision has one); tuples:
// prefixItems (2020-12) with items for the rest, and items as an array
// (draft-04 to 2019-09) with additionalItems for the rest (false: none),
// item i of the tuple valid for its schema, items past minItems optional
// in order, maxItems cutting the prefix short; enum,
// const (string values filtered by pattern, format and the length
// keywords beside them); anyOf, with the keywords beside it distributed
// over its branches (A and (B or C) is (A and B) or (A and C); a branch
// they leave empty is dropped); oneOf whose branches admit pairwise
// disjoint types or are objects told apart by a property both require
// whose string const or enum values share none (a discriminator), as
// anyOf; allOf merged into one schema where the merge is exact (types
// intersected, required united, a property of two branches given both
// schemas, the tighter of two bounds, enum values in both, a branch's
// additionalProperties carried to the properties other branches declare;
// a $ref branch is its target; two different patterns or anyOf lists are
// refused; merges are memoized by content, so recursive definitions
// terminate, and bounded by the schema text they read); $ref to "#" or any
// JSON pointer into the document (#/$defs/x, $defs or definitions at any
// depth, a property's schema; recursion allowed, a cycle that consumes
// nothing refused); an empty schema or true (any value). A keyword that
// constrains only another type than the schema's type list allows is
// vacuous and ignored (pattern beside type integer). Keywords that assert
// nothing are ignored, as JSON Schema tells a validator to ignore what it
// does not know: annotations (title, description, default, examples,
// $comment, deprecated, readOnly, …), vendor and unknown keywords (x-*,
// _format, javaType, …), $schema, $id and draft-04 id, $anchor,
// additionalItems beside items that is no array (it asserts nothing), and
// format names that no draft defines (a validator ignores a format it
// does not know).
//
// propertyNames (propnames.go): one that accepts every key (true, {}, or
// a type that admits strings with keywords only for other types: zod 4's
// z.record emits {"type": "string"}) asserts nothing and is ignored; a
// finite set of keys (enum or const, filtered by the string keywords
// beside them; a type without strings, or false: none) makes the object
// one of declared properties only, each admitted key carrying its
// properties schema, the schemas of the patterns it matches or
// additionalProperties (a key whose schemas admit no value together never
// comes), so minProperties and maxProperties count exactly; a regular
// language (pattern, format, minLength, maxLength) is the grammar of a
// map's keys, beside patternProperties the product of its automaton and
// each pattern's, beside declared properties the product with the
// automaton of every string but their names (an undeclared key never
// spells one, whatever its escapes), and drops the declared properties
// it refuses. Other keywords in it are refused.
// uniqueItems (unique.go): false asserts nothing; true is a grammar where
// at most one item is allowed, or where items are a finite set of at most
// 64 scalar values (enum or const filtered as enum is, type boolean or
// null; 1 and 1.0 one value of two spellings): a sequence of distinct
// values, its rules grown per set of values written; refused otherwise
// (strings, numbers or objects at large, tuples).
// not (not.go) where it reduces to the keywords beside it: false
// (nothing), true and {} (no value), {not: X} (X, an allOf branch), {type:
// T} (T removed from the types; integer alone refused where number
// stays), {enum}/{const} (their values removed beside enum or const, JSON
// equality; beside types, values of excluded types vacuous, null removes
// the type null, a boolean beside type boolean alone leaves the other, and
// strings are excluded from the string grammar: a trie of them whose
// every other branch accepts anything, one more factor of the product
// automaton beside pattern, format and the length keywords);
// and {"not": {"required": …}} above. if/then/else (ifthen.go) is (if and
// then) or (not if and else), an anyOf beside the other keywords, where
// not if is compiled: if a boolean, a type, enum, const or not condition,
// or a discriminator (type object, properties each with only const or
// enum, required), whose negation is a non-object, an object without a
// required property, or one whose property has none of the values (a not
// beside that property's own schema, which must reduce: an enum or a
// string does).
// const beside enum is the const where enum holds it.
//
// Refused, naming the keyword and its place: any other not or if,
// prefixItems under a $schema before
// 2020-12, items as an array under 2020-12, additionalItems beside
// prefixItems, tuple keywords in one allOf branch beside items keywords in
// another, minItems above what a closed tuple allows,
// minProperties beside patternProperties or dependencies,
// dependencies and dependentSchemas with schemas, contains,
// unevaluated*, multipleOf but a whole number, oneOf with overlapping branches, the formats of the drafts not listed below (uri-reference,
// iri, idn-email, json-pointer, regex, …), number bounds admitting no
// number of that precision, bounds on "integer and number" together or
// without a type, keywords beside $ref (2019-09 on) or const, a $ref when
// an $id below the root could move its base, required names that
// properties does not declare, repetition bounds above 1024, and a
// document whose subschemas, rules or merges pass their bounds. Generated
// text is compact JSON with optional whitespace (nothing, a space, or a
// newline and up to 20 spaces or tabs) between tokens; integers have at
// most 16 digits, fractions at most 16, exponents at most 2, so that every
// number fits a float64.
//
// # Patterns and formats
//
// A pattern is an ECMAScript regular expression (JSON Schema's dialect)
// translated construct by construct into Go's regexp/syntax (pattern.go),
// then compiled into rules over the JSON string's bytes: each character
// class becomes UTF-8 byte ranges, '"' and '\' their escapes, control
// characters their short or \u00XX escapes, and any character below U+0100
// may also be written \u00XX. The translation keeps ECMAScript's meaning
// where the two dialects differ: "." excludes every line terminator, \s
// and \S are ECMAScript's whitespace sets, a character class matches only
// Basic Multilingual Plane characters (a pattern without the u flag counts
// UTF-16 code units), {n} is a quantifier only where ECMAScript reads one.
// A pattern is a search: unanchored, any characters may stand before and
// after; ^ and $ anchor it at the start or end of a top-level branch only.
// Refused by name: backreferences, lookahead and lookbehind, word
// boundaries, inline flags, \p and other escapes ECMAScript reads
// differently, anchors inside the pattern, characters outside the Basic
// Multilingual Plane, repetitions above 1024. Beside minLength and
// maxLength a pattern or format is its regular grammar when every string
// it admits has an allowed length; otherwise (relen.go) it is made a
// deterministic automaton over characters (at most 2000 states, built at
// compile time) run beside a count of the characters written, whose
// rules, one per (state, count), are grown where a parse reaches them; a
// transition is kept only where a match of an allowed length still
// follows. Exact either way: a length no match has is a bad schema, not an
// empty grammar; a maxLength above 1024 generates matches of up to 1024.
// A format beside a pattern (zod 4's z.email(), z.uuid(),
// z.iso.datetime() write both) is the product of their automata (pairs of
// states each of which can still accept, at most 2000), run beside the
// count as above: a string is generated exactly when both admit it (and
// the length keywords); no common string is a bad schema.
// Formats are regular expressions (format.go) whose language is a subset
// of the RFC's: date, time and date-time (RFC 3339; days per month and
// leap years exact, no leap second, an offset required), duration (RFC
// 3339 appendix A), uuid, ipv4 (no leading zeros), ipv6 (without an
// embedded IPv4 address), hostname (RFC 1123 labels of up to 31
// characters, no consecutive hyphens, at most 7 labels), email (a
// dot-atom local part of at most 62 characters at a host name) and uri
// (RFC 3986: a scheme, then an authority — a registered name, maybe
// empty, and an optional port — with an absolute path, or an absolute,
// rootless or empty path; query and fragment).
//
// # Coverage (MaskBench)
//
// `cloisonctl grammar bench DIR` runs MaskBench's correctness methodology
// (each schema compiled; each valid instance, as compact JSON in its own
// key order, must be accepted by Match and each invalid one refused) over
// its 11,305 schemas; with --vocab (a GGUF vocabulary) it also runs the
// mask methodology (each valid instance tokenized, the mask computed
// before every token, the token checked against it). Times are the
// bench's thread CPU time (one goroutine locked to one OS thread), so that
// other jobs on a shared machine do not count. On an AMD EPYC (Zen 3, 2
// vCPUs shared with other builds): 9,542 passing (84.4%; before any-order
// objects at any size, bounded patterns as automata, dependencies,
// multipleOf 9,284, at first 4,174), 1,755 compile errors (refusals), 8
// validation errors (9 valid instances refused: an integer of 18 digits,
// an undeclared key spelled with an escape, an undeclared key whose value
// must satisfy every pattern's schema, five not yet analysed), 0
// invalidation errors; compile time p50 0.45 ms, p95 5.6 ms, p99 19.3 ms.
// With the Llama 3 vocabulary (ggml-vocab-llama-bpe.gguf, 128,256 tokens;
// every 40th file): TTFM (compile and first mask) p50 0.54 ms, p99 12 ms;
// TBM p50 36 µs, p75 75 µs, p90 0.19 ms, p95 0.50 ms, p99 6.3 ms (before
// the flat trie and the shared walks: p95 30 ms, p99 40 ms). Since
// bounded strings count and walks below a first byte are shared (below),
// measured side by side on an Intel Xeon (Sapphire Rapids class, shared,
// load average 2): TBM p50 21 µs, p90 0.13 ms, p95 0.22 ms, p99 0.93 ms,
// mean 72 µs with the keywords below (0.76 ms and 67 µs without them;
// before, same run: p90 0.13 ms, p95 0.32 ms, p99 4.1 ms, mean 190 µs); TTFM p50 0.39 ms, p99 9.8 ms (before 0.39 and 11.4 ms,
// within the noise of the few slowest compiles); pass counts unchanged
// over all 11,305 files. Since a transition fills every byte its stacks
// treat alike, bounded patterns and undeclared keys are one chunk each,
// large sub-walks are bitsets and sparse chunks OR their nonzero words
// (side by side, three rounds, Intel Xeon, Sapphire Rapids class, load
// average 8): TBM p50 6.2 µs, p75 20 µs, p90 64 µs, p95 0.11 ms, p99
// 0.39 ms (0.45 ms in the loudest round), mean 32 µs (before, same run:
// 22 µs, 53 µs, 0.13 ms, 0.22 ms, 0.92 ms, mean 73 µs); TTFM unchanged
// (p50 0.36 ms both, p99 within the noise of the slowest compiles); the
// every-40th pass counts unchanged. LLGuidance's
// published figures: 8,909 passing, 20 validation and 0 invalidation
// errors, TBM p99 about 0.5 ms. The mask tail is now the first mask of
// an object's member state with an undeclared key: the root of the key's
// trie of declared names (its first bytes differ per object, so its walk
// is not shared; the walk below each first byte is) and the states of the
// object's continuation that the tokens closing the key reach, each built
// once per grammar. With format
// beside pattern, propertyNames, uniqueItems over finite items and the not
// and if/then/else that reduce (Intel Xeon, Sapphire Rapids class, 2 cores
// shared, load average 12 to 15): 9,832 passing (87.0%; the code before
// them 9,618 on the same machine), 1,464 compile errors, 9 validation
// errors (11 valid instances refused, the same count as before), 0
// invalidation errors; compile time p50 0.28 ms, p95 3.6 ms, p99 12.7 ms
// (before them there: 0.29, 3.5, 13.4 ms). The remaining refusals lead
// with oneOf with overlapping branches (479 schemas), a not that does not
// reduce (177) and uniqueItems over items that are no finite set (84).
//
// # How a mask is computed
//
// A parse state is a set of stacks of grammar positions (the grammar may be
// ambiguous for a while: anyOf, optional properties). The vocabulary is a
// trie of token bytes (Vocab, built once per tokenizer). A stack's mask
// would be a walk of the whole trie, advancing the stack byte by byte and
// pruning dead subtrees. Instead each stack is cut (cut) at its lowest
// string or number frame: the part above depends on nothing below, so its
// walk is cached per Grammar and Vocab (local), keyed by the positions it
// holds — the state "inside a string" is the same wherever that string
// stands — and shared on the Vocab between grammars whose cut parts
// describe the same language (langKey: the positions it reaches, numbered
// in the order met, with their byte sets and rules; none when it reaches a
// grown rule not yet made or more than 256 positions), so a new schema's
// plain strings start warm. The trie is flattened in depth-first order
// (byte, subtree end, tokens per node), so a walk reads arrays in order
// and skips a dead subtree in one step. The walk records the trie nodes
// where the cut part ends (a string's closing quote) and tokens go on
// below; only the few tokens below those nodes are
// walked with the rest of the stack at each step. Parse states are
// interned (frames hash-consed, sets of stacks numbered) and their byte
// transitions memoized, so a walk costs a table lookup per trie node; a
// transition made for one byte is written for every byte that the
// state's stacks treat alike (each stack's byte set or its complement,
// intersected), so a state inside a string learns its printable bytes
// at once. A bounded pattern's string keeps its closing quote in its own
// rule and an undeclared key's rest (past its trie of declared names) is
// a leaf, so that each is one chunk, not a chunk per character with the
// rest of the stack walked below every character's end. A mask ORs a
// sparse chunk's bitset by its nonzero words only, and a stack's cut is
// memoized. A
// walk from the root memoizes, on the Vocab, what it finds below each
// first byte, keyed by the language of its state there (langKey) and the
// node (subwalk.go): past a byte that leaves an undeclared key's trie of
// declared names the key is any string, whatever the object, so every
// state of every such trie reuses one walk below that byte (kept as a
// bitset where it holds many tokens: below a space lies nearly half of
// Llama 3's vocabulary). A
// length-bounded string (minLength, maxLength) is a state per count of
// characters written; its masks derive from one walk of the count-free
// string (string{0,-1}, shared on the Vocab) that counts the characters
// each token begins before the closing quote or its end (counted.go): with
// at most r and at least m characters left, a token inside the string is
// allowed when it begins at most r, one that closes it when it begins m
// to r (TestBoundedStringMaskMatchesBruteForce,
// TestSharedSubWalksMatchBruteForce). Walks are shared in two generations
// (a flush keeps those used since the last). The memo makes a walk that
// shares nothing about a third dearer (BenchmarkAllowedCold, a fresh
// Vocab: 0.55 → 0.74 ms on the Xeon), repaid by the first walk that
// shares. The
// first mask of a string state over 32k tokens is a fraction of a
// millisecond, later ones an OR of bitsets. Cache (used by the service)
// shares a schema's compiled grammar between one owner's (a tenant's)
// requests, so a schema seen before starts warm; owners never share an
// entry, and the cache keeps a byte budget (Grammar.Bytes, measured again
// at every hit) shared fairly between owners: the owner furthest over its
// share loses its least recently used entry first, so one owner filling
// the cache evicts its own entries, never another's within its share
// (TestCacheBudgetPerOwner). Measured by BenchmarkConstrainedDecode (32k vocabulary,
// process CPU time per token, constrained ÷ unconstrained, greedy, AMD
// EPYC 2 cores shared with other builds): 1.01 with the schema shared, 1.07
// compiled afresh per request (up to 1.3 in runs under heavy load); in its
// CPU profile the grammar's own functions are under 2% of the engine's
// step time. The first mask of a string state over 32k tokens costs about
// 1 ms (BenchmarkAllowedCold, on a fresh Vocab), a warm mask about 12 µs. At temperature 1 the
// constrained decode is faster than the plain one, since the sampler sorts
// only the allowed tokens.
//
// # Driving it
//
//	g, err := grammar.FromSchema(schema) // at request decode: a 400 here
//	v := grammar.VocabFrom(tok)          // once per model
//	m := grammar.NewMatcher(g, v)        // once per request
//	for !m.Closed() {
//		mask, _ := m.Allowed()          // BEFORE sampling: drop tokens not in mask
//		tok := sample(logits, mask)
//		if err := m.Accept(tok); err != nil { fail closed }
//	}
//
// The engine does this through sample.Constraint: GenerateRequest.Grammar
// set, the request finishes with "stop" as soon as the grammar is complete
// and nothing may follow (Closed), or on an end-of-generation token once it
// is complete; max_tokens reached first gives "length" with incomplete
// output. Stop sequences and stop tokens the client asked for still end
// generation where they match, even inside the JSON.
//
// # Composing: tool calls
//
// Part values compose literal framing with schemas, for tool_choice
// "required" or a named function: a model family's call syntax around the
// arguments' schema.
//
//	args := grammar.Schema([]byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`))
//	call := grammar.Seq(grammar.Literal(`<tool_call>{"name": "get_weather", "arguments": `), args, grammar.Literal("}</tool_call>"))
//	one := grammar.Choice(call, otherCall)           // any one of several tools
//	g, err := grammar.Compile(grammar.Repeat(one, "\n", 1, -1)) // parallel calls: one or more
//
// Seq, Choice, Repeat (min, max, literal separator; max < 0 unbounded),
// Literal, Schema and AnyObject are the whole vocabulary; Compile reports
// a schema's errors as FromSchema does.
//
// # Grammars written as text
//
// FromText compiles a regular expression that the whole text must match
// (Regex: ECMAScript's dialect, translated as a pattern is, anchored at
// both ends), llama.cpp's GBNF (GBNF: rules, root the start) or the Lark
// subset of OpenAI's custom-tool grammars (Lark: start the start,
// terminals, /regex/ terminals, %import common.X, %ignore), each parsed
// into a small tree of literals, code-point classes, references,
// sequences, alternatives and repetitions (text.go, regex.go, gbnf.go,
// lark.go) and compiled into the same rules as a schema, a class as the
// UTF-8 byte ranges of its code points. What is refused is named
// (ErrUnsupportedGrammar: backreferences, lookaround, token references,
// left recursion, an unbounded repetition of what may match nothing,
// other Lark directives); a text that does not parse is ErrBadGrammar
// with its line and column. A grammar's sources are bounded
// (MaxTextBytes) and so are its rules and elements (counted before a
// repetition is written out). Lark is matched over characters without a
// lexer: text a Lark lexer would split otherwise is accepted as the rules
// read it. The rules whose parse stacks stay bounded (no rule they reach
// lies on a cycle through a reference that is not last in its
// alternative) are marked leaves, so a regex's or a terminal's masks are
// cached per state like a string's. Cache.FromText keeps them with the
// owner's schemas under the same byte budget. llama.cpp's own grammars
// are test data (testdata/gbnf); TestTextMaskMatchesBruteForce checks the
// masks against the reference recognizer, TestRegexAgainstGo the regex
// language against Go's regexp.
//
// # Structural tags
//
// FromText(StructuralTag, obj) reads XGrammar's structural tag object (as
// vLLM and SGLang take it in response_format): the legacy form
// {"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
// "triggers": […]} or the format form whose format is "triggered_tags"
// (tags of content json_schema or const_string, at_least_one,
// stop_after_first; other format and content types refused by name as
// ErrUnsupportedGrammar). The output is free text until a trigger is
// written, then the rest of one of the begins that trigger opens, a JSON
// value of its schema and its end, then free text again (structtag.go).
// Unlike CompileLazy, whose constraint never lets go once triggered, it is
// one context-free grammar: the free text is a rule per state of the
// trigger scanner (buildDFA, the same DFA the lazy grammars use), each
// alternative a byte class and the next state, or, on the byte that
// completes a trigger, its tags and then the free text again. So a token
// may end free text, complete the trigger and begin the JSON, or end a tag
// and go on with free text, each mask exact (TestStructuralTagMaskMatchesBruteForce
// against a reference recognizer written from the definition); a structural
// tag stands after a reasoning marker (After) as any grammar, and its
// values take a whitespace policy (StructuralTagWith). Free text
// takes every token with text, and no control token but the end of
// generation (as XGrammar). A tag belongs to the trigger the scanner sees
// complete first in its begin, which must complete exactly at that
// trigger's end; a tag no trigger opens, a trigger that opens no tag, no
// structures, an unknown key at any level are ErrBadGrammar naming them.
// Measured (Intel Xeon, Sapphire Rapids class, 2 cores shared, load 10 to
// 17): a free step over 32k tokens, masks warm, 4.8 µs
// (BenchmarkStructuralTagFreeStep; the lazy grammar's 0.48 µs in the same
// run: an OR of one bitset per alternative of the scanner state instead of
// one copy); compiling vLLM's two-function example and its first two
// masks on a fresh Vocab 7.5 ms (BenchmarkStructuralTagFirstMask; a string
// state's first mask 0.63 ms in the same run), paid once per grammar,
// which the Cache keeps per owner.
//
// The whitespace between JSON tokens is a policy (Whitespace, given to
// CompileWith, FromSchemaWith and Cache.FromSchemaWith): Indent, the
// default described above; Compact, nothing (what OpenAI's strict
// structured outputs produce); Space, nothing or one space.
//
// # Lazy grammars: calls under tool_choice "auto"
//
// CompileLazy(triggers, controls) is a grammar that constrains nothing
// until the output contains a trigger's text (as llama.cpp's lazy grammars
// and trigger patterns do), then the output from that text on must be a
// sentence of the trigger's Body, which begins with the text: free text,
// then, once the model opens a tool call in its family's syntax (Hermes
// <tool_call>, Mistral [TOOL_CALLS], Llama 3 <|python_tag|>, or Llama 3's
// JSON object as the first text of the answer: Trigger.AtStart), the call
// as a forced call's grammar has it. A trigger may be split across tokens
// or begin inside one: a token whose text completes the trigger is
// allowed exactly when its remaining bytes are a valid start of the body,
// so the mask is exact. A control token (no bytes) counts as its text when
// that text is one of controls (the markers the tool-call parser reads from
// control tokens: Mistral's [TOOL_CALLS] is one in Mistral vocabularies),
// as nothing otherwise; Vocab keeps the control tokens' text for this
// (VocabFrom; NewVocabControls).
//
// After(marker, g, controls) is the same free phase with one trigger
// whose body is a grammar already compiled (a cached schema): free text
// until marker, then from the byte after it a sentence of g. It is
// structured output after a reasoning model's reasoning (marker
// </think>, which the reasoning parser reads at the same place): the
// reasoning is free, the answer constrained, and a generation that stops
// before the marker has no answer at all.
//
// The free phase's state is a small scanner (a DFA over the trigger
// texts, the longest suffix of the text that may still begin one; and for
// at-start triggers whether the text so far is Unicode whitespace, with an
// incomplete UTF-8 sequence pending), a pure function of the sequence's own
// tokens, so a lazy matcher stays deterministic and batch-invariant. Its
// mask is all tokens but the few that complete a trigger into bytes the
// body refuses: which tokens complete a trigger from a scanner state is
// cached on the Vocab per trigger set (shared by requests), the mask per
// grammar and state, so a free step costs a copy of the cached bitset and
// Accept a table lookup per byte. Matcher.Triggered tells the phases
// apart; Match and MatchPrefix read a lazy grammar's text with control
// tokens spelled out. Measured (AMD EPYC, 2 cores shared with other
// builds): a free step over 32k tokens is about 130 ns (BenchmarkLazyFreeStep:
// Allowed and Accept, masks warm); BenchmarkLazyFreeDecode (engine, 32k
// random model, the grammar compiled per request, never triggered): CPU
// time per token ÷ unconstrained 1.05 greedy and 0.98 at temperature 1,
// within the run-to-run noise.
package grammar
