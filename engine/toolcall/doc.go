// Package toolcall finds the tool calls in a model's generated text, in the
// format its chat template teaches it, and splits the text into content and
// calls, incrementally, so that a stream can send content as it comes and
// each call once it is whole.
//
// Formats (Format, chosen from the template by Detect):
//
//	Hermes    <tool_call>BODY</tool_call>, repeated. BODY is JSON
//	          {"name": N, "arguments": {...}} (Qwen 2.5/3, QwQ, Hermes 2/3,
//	          Granite 4, MiMo, Bielik), or Qwen3-Coder's XML
//	          <function=N><parameter=K>V</parameter>...</function> (Qwen3.5,
//	          Nemotron 3, StepFun 3.5), or GLM's
//	          N<arg_key>K</arg_key><arg_value>V</arg_value>... (GLM 4.6/4.7,
//	          Ling 3, Laguna). An XML or GLM value is JSON when it parses as
//	          JSON, a string otherwise (as llama.cpp reads it).
//	Llama3    {"name": N, "parameters": {...}} as the whole answer (Llama
//	          3.1/3.2/3.3 JSON tool calling), or after <|python_tag|>;
//	          several calls may be separated by ";".
//	Mistral   [TOOL_CALLS] then a JSON list [{"name", "arguments", "id"}]
//	          (Mistral Nemo), or N[ARGS]{...} / N[CALL_ID]ID[ARGS]{...}, each
//	          call with its own [TOOL_CALLS] (Mistral Small 3.2, Devstral,
//	          Ministral 3).
//	CommandR7B <|START_ACTION|>[{"tool_call_id", "tool_name",
//	          "parameters"}]<|END_ACTION|>.
//	DeepSeekR1 <｜tool▁calls▁begin｜> then, per call,
//	          <｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}```<｜tool▁call▁end｜>,
//	          then <｜tool▁calls▁end｜>.
//	Harmony   gpt-oss: a harmony message whose header names the recipient
//	          functions.N, before or after its channel
//	          (<|channel|>commentary to=functions.N <|constrain|>json<|message|>
//	          as the model writes it, <|start|>assistant to=functions.N
//	          <|channel|>commentary json<|message|> as the template does), then
//	          a JSON object and <|call|> (or <|end|>, or nothing at the end of
//	          the generation: <|call|> is an end-of-generation token the
//	          engine may stop on unwritten). Every other message (analysis,
//	          final, a builtin tool's recipient) is not a call and goes on, as
//	          written, to the channel parser (service's harmony stream), which
//	          the API runs after this one for this format. Its Frame is the
//	          message as the model writes it (the markers spelled as text);
//	          its triggers would open on every message, so the API refuses
//	          strict tools under "auto" for it.
//
// Cases ported from llama.cpp's tests/test-chat.cpp (parsing expectations
// only, no code) are in toolcall_test.go.
//
// Rules. A call's arguments must be a JSON object and its name one of the
// offered functions; a block that is not a well-formed call (or names an
// unknown function, or is cut off by the end of the generation) is content,
// as written, never dropped: the client sees what the model wrote. Arguments
// are returned as compact JSON text with the model's key order. Whitespace
// between calls, and after the last one, is not content. Text held back
// while it may still become a marker (a suffix of the text that is a prefix
// of a start marker, or an open block) is released as content by Finish
// when it does not.
//
// The driving loop (the API's stream):
//
//	p := toolcall.NewParser(format, names)
//	for each generated piece:   events = p.Feed(piece)   // send each event
//	at the end of generation:   events = p.Finish()
//
// Forcing a call. Frame gives, per format, the literal text before and
// after a call's arguments object; tool_choice "required" or a named
// function is constrained decoding (engine/grammar) of prefix + the
// function's parameters schema + suffix (one such frame per offered
// function for "required"). TestFrame checks that Parse reads every frame
// back as the call.
//
// Strict calls under "auto". Triggers gives what opens a block of calls
// where the Parser looks for one (the markers; for Llama 3 also "{" as the
// first text of the answer), Controls the markers vocabularies hold as
// control tokens, Sep what goes between two calls of one answer. The API
// builds from them a lazy grammar (grammar.CompileLazy) when a strict tool
// is offered under tool_choice "auto": free text until a trigger, then one
// or more frames joined by Sep (one with parallel_tool_calls false), each
// strict function's arguments by its schema, any other's as any JSON
// object. Since the Parser starts a block only at a trigger, every call it
// reads was constrained (TestTriggersAndSep checks that what such a grammar
// writes reads back as the calls).
//
// A Parser is not safe for concurrent use; it is one stream's state.
package toolcall
