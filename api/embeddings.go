package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/service"
)

// embeddingFields are the fields of POST /v1/embeddings.
var embeddingFields = map[string]field{
	"model":           {rule: implemented},
	"input":           {rule: implemented, note: "a string, strings, token ids or lists of them"},
	"encoding_format": {rule: implemented, note: "float or base64"},
	"dimensions":      {rule: implemented, note: "truncated and renormalised"},
	"user":            {rule: ignored},
}

// EmbeddingRequest is the body of POST /v1/embeddings (OpenAI's).
type EmbeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat *string         `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           json.RawMessage `json:"user"`
}

// Embedding is one vector of an EmbeddingResponse: a list of floats, or
// with encoding_format base64 the base64 of their little-endian float32
// bytes, as OpenAI sends it.
type Embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// EmbeddingUsage counts the prompt tokens an embeddings request cost.
type EmbeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// EmbeddingResponse is the answer of POST /v1/embeddings.
type EmbeddingResponse struct {
	Object string         `json:"object"`
	Data   []Embedding    `json:"data"`
	Model  string         `json:"model"`
	Usage  EmbeddingUsage `json:"usage"`
}

// embeddings serves POST /v1/embeddings (service.Embed).
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req EmbeddingRequest
	if err := decodeFields(r.Body, s.cfg.MaxBody, embeddingFields, &req); err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	if err := s.req.CheckModel(p, req.Model); err != nil {
		WriteHTTPError(w, err)
		return
	}
	b64 := false
	if req.EncodingFormat != nil {
		switch *req.EncodingFormat {
		case "float":
		case "base64":
			b64 = true
		default:
			WriteHTTPError(w, ErrBadField.Withf("encoding_format: float or base64"))
			return
		}
	}
	q := service.EmbedRequest{ID: requestID(w), Model: req.Model}
	if req.Dimensions != nil {
		if *req.Dimensions < 1 {
			WriteHTTPError(w, ErrBadField.Withf("dimensions: must be at least 1"))
			return
		}
		q.Dimensions = *req.Dimensions
	}
	var err error
	if q.Texts, q.Inputs, err = embeddingInput(req.Input); err != nil {
		WriteHTTPError(w, err)
		return
	}
	res, err := s.req.Embed(r.Context(), p, q)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if res.Receipt != "" {
		w.Header().Set("X-Cloison-Receipt", res.Receipt)
	}
	out := EmbeddingResponse{Object: "list", Model: req.Model, Data: make([]Embedding, len(res.Vectors)),
		Usage: EmbeddingUsage{PromptTokens: res.Prompt, TotalTokens: res.Prompt}}
	for i, v := range res.Vectors {
		var e any = v
		if b64 {
			e = EncodeEmbedding(v)
		}
		out.Data[i] = Embedding{Object: "embedding", Index: i, Embedding: e}
	}
	writeJSON(w, 200, out)
}

// EncodeEmbedding is v as OpenAI's base64 encoding_format sends it: the
// base64 of its little-endian float32 bytes.
func EncodeEmbedding(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// embeddingInput reads OpenAI's input: a string, a list of strings, a
// list of token ids, or a list of lists of token ids. Errors: ErrBadField
// for anything else (null, an empty list, mixed kinds).
func embeddingInput(raw json.RawMessage) ([]string, [][]int64, error) {
	raw = bytes.TrimSpace(raw)
	bad := ErrBadField.Withf("input: a string, a list of strings, a list of token ids or a list of lists of token ids")
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil, ErrBadField.Withf("input is required")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return nil, nil, bad
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		return texts, nil, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return nil, [][]int64{ids}, nil
	}
	var lists [][]int64
	if json.Unmarshal(raw, &lists) == nil {
		return nil, lists, nil
	}
	return nil, nil, bad
}

// embedded is what request.completed records of an embeddings request:
// service.Responses.Embedded.
func (s *Server) embedded(t cloison.TenantID, inputs [][]int32, vecs [][]float32) *audit.Embedded {
	return s.ops.responses.Embedded(t, inputs, vecs)
}

// Embed is POST /v1/embeddings over gRPC (service.Embed): the receipt in
// the cloison-receipt trailer, on success only.
func (g *inferenceService) Embed(ctx context.Context, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	g = g.on(req.GetModel())
	if err := g.checkModel(ctx, req.GetModel()); err != nil {
		return nil, err
	}
	if req.GetDimensions() < 0 {
		return nil, ErrBadField.Withf("dimensions: must be at least 1")
	}
	id := grpcRequestID(ctx)
	q := service.EmbedRequest{ID: id, Model: req.GetModel(), Texts: req.GetTexts(), Dimensions: int(req.GetDimensions())}
	for _, l := range req.GetTokenLists() {
		q.Inputs = append(q.Inputs, l.GetIds())
	}
	res, err := g.s.req.Embed(ctx, grpcPrincipal(ctx), q)
	if err != nil {
		return nil, err
	}
	out := &inferencev1.EmbedResponse{PromptTokens: int64(res.Prompt), RequestId: string(id)}
	for _, v := range res.Vectors {
		out.Vectors = append(out.Vectors, &inferencev1.Vector{Values: v})
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ReceiptKey, res.Receipt))
	return out, nil
}
