package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/service"
)

// The smaller OpenAI- and vLLM-compatible surfaces, so that clients written
// for them work unchanged: content parts, GET /v1/models/{id}, POST /tokenize
// and /detokenize, the Authorization scheme, and JSON bodies for unknown
// routes and methods.

// Content parts. A chat message's content may be a list of parts; text
// parts are joined with "\n" (as vLLM does with its default string content
// format) before the template sees them. Every other part type (image_url,
// input_audio, file, refusal, ...) is refused with ErrUnsupported naming it:
// this server serves text models only, and dropping a part would answer a
// question the client did not ask.
var textPartFields = map[string]field{"type": {rule: implemented}, "text": {rule: implemented}}

// flattenContent rewrites every content-part list in the messages of the
// JSON object body to the string the parts concatenate to; a body without
// part lists is returned unchanged. Errors: ErrBadField (an empty list, a
// part that is not an object with a string type and text), ErrUnsupported
// (a part type other than text, a text part with another field).
func flattenContent(body []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return body, nil // decoding reports it
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(obj["messages"], &msgs) != nil {
		return body, nil
	}
	changed := false
	for i, m := range msgs {
		c := bytes.TrimSpace(m["content"])
		if len(c) == 0 || c[0] != '[' {
			continue
		}
		text, err := contentText(c, fmt.Sprintf("messages[%d].content", i))
		if err != nil {
			return nil, err
		}
		m["content"], _ = json.Marshal(text)
		changed = true
	}
	if !changed {
		return body, nil
	}
	obj["messages"], _ = json.Marshal(msgs)
	return json.Marshal(obj)
}

// contentText is the text a content-part list concatenates to; where names
// the list in errors.
func contentText(list []byte, where string) (string, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(list, &parts); err != nil {
		return "", ErrBadField.Withf("%s must be a string or a list of content parts", where)
	}
	if len(parts) == 0 {
		return "", ErrBadField.Withf("%s must not be an empty list", where)
	}
	texts := make([]string, len(parts))
	for j, raw := range parts {
		at := fmt.Sprintf("%s[%d]", where, j)
		var part struct {
			Type *string `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &part); err != nil || part.Type == nil {
			return "", ErrBadField.Withf("%s must be an object with a string type", at)
		}
		if *part.Type != "text" {
			return "", ErrUnsupported.Withf("%s.type %q: only text content parts are supported", at, truncate(*part.Type, maxFieldName))
		}
		if err := checkFields(raw, textPartFields, at+"."); err != nil {
			return "", err
		}
		if part.Text == nil {
			return "", ErrBadField.Withf("%s.text must be a string", at)
		}
		texts[j] = *part.Text
	}
	return strings.Join(texts, "\n"), nil
}

// bearerToken returns the credentials of an Authorization header with the
// Bearer scheme, whose name is case-insensitive (RFC 9110 §11.1).
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// model answers GET /v1/models/{id}: the model object when the tenant may
// use it, otherwise 404 (ErrUnknownModel), the same for a model this node
// does not serve and one the tenant is not allowed.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	id := r.PathValue("id")
	if id != s.cfg.ModelName || !p.TenantRecord.Allows(id) {
		if slices.Contains(s.req.AdapterModels(p), id) {
			writeJSON(w, 200, s.adapterEntry(p, id))
			return
		}
		WriteHTTPError(w, ErrUnknownModel.Withf("%q", truncate(id, maxFieldName)))
		return
	}
	writeJSON(w, 200, s.modelEntry(p))
}

// tokenizeFields are the fields of a POST /tokenize body (vLLM's shape):
// text in prompt, or chat messages rendered with the model's template and
// its generation prompt.
var tokenizeFields = map[string]field{
	"model":                 {rule: implemented},
	"prompt":                {rule: implemented},
	"messages":              {rule: implemented},
	"add_special_tokens":    {rule: implemented}, // prompt only: BOS (default true)
	"add_generation_prompt": {rule: refused, neutral: []string{`true`}},
}

// TokenizeRequest is a POST /tokenize body.
type TokenizeRequest struct {
	Model            string         `json:"model"`
	Prompt           *string        `json:"prompt"`
	Messages         []chat.Message `json:"messages"`
	AddSpecialTokens *bool          `json:"add_special_tokens"`
}

// TokenizeResponse is the answer of POST /tokenize.
type TokenizeResponse struct {
	Count       int     `json:"count"`
	MaxModelLen int     `json:"max_model_len"`
	Tokens      []int32 `json:"tokens"`
}

// DetokenizeRequest is a POST /detokenize body.
type DetokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

var detokenizeFields = map[string]field{"model": {rule: implemented}, "tokens": {rule: implemented}}

// tokenize answers POST /tokenize, metered as the gRPC Tokenize method is
// (service.Requests.Tokenize) and counted in cloison_tokenize_tokens_total. Errors: as
// DecodeChat's decoding, ErrUnknownModel, the chat template's, the
// Limiter's.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req TokenizeRequest
	if err := decodeFields(r.Body, s.cfg.MaxBody, tokenizeFields, &req); err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	if err := s.req.CheckModel(p, req.Model); err != nil {
		WriteHTTPError(w, err)
		return
	}
	in := service.TokenizeInput{BOS: true}
	switch {
	case req.Prompt != nil && req.Messages != nil:
		WriteHTTPError(w, ErrBadField.Withf("prompt and messages are exclusive"))
		return
	case req.Prompt != nil:
		in.Text = *req.Prompt
		if req.AddSpecialTokens != nil {
			in.BOS = *req.AddSpecialTokens
		}
	case len(req.Messages) > 0:
		if req.AddSpecialTokens != nil {
			WriteHTTPError(w, ErrUnsupported.Withf("add_special_tokens applies to prompt only (the template writes a chat's special tokens)"))
			return
		}
		in.Chat, in.Messages = true, req.Messages
	default:
		WriteHTTPError(w, ErrBadField.Withf("prompt or messages is required"))
		return
	}
	ids, err := s.req.Tokenize(p, in)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	s.metrics.forModel(s.cfg.ModelName).tokenizeToks.WithLabelValues(s.metrics.tenant(p.Tenant)).Add(float64(len(ids)))
	if ids == nil {
		ids = []int32{}
	}
	writeJSON(w, 200, TokenizeResponse{Count: len(ids), MaxModelLen: s.contextFor(p), Tokens: ids})
}

// detokenize answers POST /detokenize: the text of token ids (special
// tokens as text), metered like tokenize for the number of ids. Errors:
// decoding's, ErrBadField (an id outside the vocabulary), ErrUnknownModel,
// the Limiter's.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var req DetokenizeRequest
	if err := decodeFields(r.Body, s.cfg.MaxBody, detokenizeFields, &req); err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	if err := s.req.CheckModel(p, req.Model); err != nil {
		WriteHTTPError(w, err)
		return
	}
	if req.Tokens == nil {
		WriteHTTPError(w, ErrBadField.Withf("tokens is required"))
		return
	}
	text, err := s.req.Detokenize(p, req.Tokens)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"prompt": text})
}

// Errors of the route fallback.
var (
	ErrNoRoute = cloison.NewError(cloison.CodeNotFound, "no such route")
)

// jsonFallback answers what mux itself would answer with text — an unknown
// route (404) or a known route with the wrong method (405, with its Allow
// header) — with an OpenAI-shaped JSON error body instead.
func jsonFallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r) // sets the pattern and path values on r
			return
		}
		mux.ServeHTTP(&fallbackWriter{ResponseWriter: w}, r)
	})
}

// fallbackWriter replaces the body of mux's own 404 and 405 answers (and
// passes redirects through).
type fallbackWriter struct {
	http.ResponseWriter
	replaced bool
}

func (f *fallbackWriter) WriteHeader(code int) {
	switch code {
	case http.StatusNotFound:
		f.replaced = true
		f.Header().Del("X-Content-Type-Options")
		WriteHTTPError(f.ResponseWriter, ErrNoRoute)
	case http.StatusMethodNotAllowed:
		f.replaced = true
		h := f.Header()
		h.Del("X-Content-Type-Options")
		h.Set("Content-Type", "application/json")
		requestID(f.ResponseWriter)
		f.ResponseWriter.WriteHeader(code)
		_ = json.NewEncoder(f.ResponseWriter).Encode(ErrorBody{Error: ErrorDetail{Message: "method not allowed",
			Type: "invalid_request_error", Code: "method_not_allowed"}})
	default:
		f.ResponseWriter.WriteHeader(code)
	}
}

func (f *fallbackWriter) Write(b []byte) (int, error) {
	if f.replaced {
		return len(b), nil // mux's text body
	}
	return f.ResponseWriter.Write(b)
}

// byteInts spells b as OpenAI's logprob bytes: a list of integers (a []byte
// would encode as base64).
func byteInts(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}
