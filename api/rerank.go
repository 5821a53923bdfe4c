package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// rerankFields are the fields of POST /v1/rerank (the shape vLLM, Jina and
// Cohere clients send).
var rerankFields = map[string]field{
	"model":            {rule: implemented},
	"query":            {rule: implemented},
	"documents":        {rule: implemented, note: "strings or {\"text\": …} objects, 1 to 2048"},
	"top_n":            {rule: implemented, note: "0 or absent: every document"},
	"return_documents": {rule: implemented},
	"user":             {rule: ignored},
}

// scoreFields are the fields of POST /v1/score (vLLM's).
var scoreFields = map[string]field{
	"model":  {rule: implemented},
	"text_1": {rule: implemented, note: "a string, or a list of one or of text_2's length"},
	"text_2": {rule: implemented, note: "a string or a list"},
	"user":   {rule: ignored},
}

// RerankRequest is the body of POST /v1/rerank.
type RerankRequest struct {
	Model           string            `json:"model"`
	Query           *string           `json:"query"`
	Documents       []json.RawMessage `json:"documents"`
	TopN            *int              `json:"top_n"`
	ReturnDocuments *bool             `json:"return_documents"`
	User            json.RawMessage   `json:"user"`
}

// RerankDocument is a document as a rerank result echoes it.
type RerankDocument struct {
	Text string `json:"text"`
}

// RerankResult is one document's score (a probability: the sigmoid of the
// rank head's logit, service.RankResult); Document only with
// return_documents.
type RerankResult struct {
	Index          int             `json:"index"`
	RelevanceScore float32         `json:"relevance_score"`
	Document       *RerankDocument `json:"document,omitempty"`
}

// RerankResponse is the answer of POST /v1/rerank: results by score,
// highest first (the lower index first on a tie).
type RerankResponse struct {
	ID      string         `json:"id"`
	Model   string         `json:"model"`
	Results []RerankResult `json:"results"`
	Usage   EmbeddingUsage `json:"usage"`
}

// ScoreRequest is the body of POST /v1/score.
type ScoreRequest struct {
	Model string          `json:"model"`
	Text1 json.RawMessage `json:"text_1"`
	Text2 json.RawMessage `json:"text_2"`
	User  json.RawMessage `json:"user"`
}

// ScoreData is one pair's score.
type ScoreData struct {
	Index  int     `json:"index"`
	Object string  `json:"object"`
	Score  float32 `json:"score"`
}

// ScoreResponse is the answer of POST /v1/score.
type ScoreResponse struct {
	ID     string         `json:"id"`
	Object string         `json:"object"`
	Model  string         `json:"model"`
	Data   []ScoreData    `json:"data"`
	Usage  EmbeddingUsage `json:"usage"`
}

// rerank serves POST /v1/rerank (service.Rank with the query and each
// document).
func (s *Server) rerank(w http.ResponseWriter, r *http.Request) {
	var req RerankRequest
	if err := decodeFields(r.Body, s.cfg.MaxBody, rerankFields, &req); err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	if err := s.req.CheckModel(p, req.Model); err != nil {
		WriteHTTPError(w, err)
		return
	}
	if req.Query == nil {
		WriteHTTPError(w, ErrBadField.Withf("query is required"))
		return
	}
	docs := make([]string, len(req.Documents))
	for i, raw := range req.Documents {
		var err error
		if docs[i], err = rerankDocument(raw); err != nil {
			WriteHTTPError(w, err)
			return
		}
	}
	topN := 0
	if req.TopN != nil {
		topN = *req.TopN
	}
	id := requestID(w)
	results, prompt, receipt, err := s.rankDocuments(r.Context(), p, id, req.Model, *req.Query, docs, topN, req.ReturnDocuments != nil && *req.ReturnDocuments)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if receipt != "" {
		w.Header().Set("X-Cloison-Receipt", receipt)
	}
	writeJSON(w, 200, RerankResponse{ID: string(id), Model: req.Model, Results: results, Usage: EmbeddingUsage{PromptTokens: prompt, TotalTokens: prompt}})
}

// rankDocuments scores docs against query and returns the results sorted,
// cut to topN (0: all). Errors: ErrBadField for a negative topN; Rank's.
func (s *Server) rankDocuments(ctx context.Context, p tenancy.Principal, id cloison.RequestID, model, query string, docs []string, topN int, withDocs bool) ([]RerankResult, int, string, error) {
	if topN < 0 {
		return nil, 0, "", ErrBadField.Withf("top_n: must be at least 0")
	}
	q := service.RankRequest{ID: id, Model: model, Pairs: make([][2]string, len(docs))}
	for i, d := range docs {
		q.Pairs[i] = [2]string{query, d}
	}
	res, err := s.req.Rank(ctx, p, q)
	if err != nil {
		return nil, 0, "", err
	}
	out := make([]RerankResult, len(res.Scores))
	for i, sc := range res.Scores {
		out[i] = RerankResult{Index: i, RelevanceScore: sc}
		if withDocs {
			out[i].Document = &RerankDocument{Text: docs[i]}
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].RelevanceScore > out[b].RelevanceScore })
	if topN > 0 && topN < len(out) {
		out = out[:topN]
	}
	return out, res.Prompt, res.Receipt, nil
}

// rerankDocument reads one document: a string, or an object whose only
// field is text (Jina's and Cohere's form). Errors: ErrBadField.
func rerankDocument(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && len(obj) == 1 && obj["text"] != nil && json.Unmarshal(obj["text"], &s) == nil {
		return s, nil
	}
	return "", ErrBadField.Withf("documents: strings or {\"text\": string} objects")
}

// score serves POST /v1/score: text_1 against each text_2 (a single
// text_1 is paired with every text_2; two lists pair by position).
func (s *Server) score(w http.ResponseWriter, r *http.Request) {
	var req ScoreRequest
	if err := decodeFields(r.Body, s.cfg.MaxBody, scoreFields, &req); err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	if err := s.req.CheckModel(p, req.Model); err != nil {
		WriteHTTPError(w, err)
		return
	}
	t1, err1 := stringOrList(req.Text1, "text_1")
	t2, err2 := stringOrList(req.Text2, "text_2")
	if err1 != nil || err2 != nil {
		WriteHTTPError(w, firstErr(err1, err2))
		return
	}
	if len(t1) != 1 && len(t1) != len(t2) {
		WriteHTTPError(w, ErrBadField.Withf("text_1: one text, or as many as text_2 (%d), got %d", len(t2), len(t1)))
		return
	}
	id := requestID(w)
	q := service.RankRequest{ID: id, Model: req.Model, Pairs: make([][2]string, len(t2))}
	for i, b := range t2 {
		q.Pairs[i] = [2]string{t1[min(i, len(t1)-1)], b}
	}
	res, err := s.req.Rank(r.Context(), p, q)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if res.Receipt != "" {
		w.Header().Set("X-Cloison-Receipt", res.Receipt)
	}
	out := ScoreResponse{ID: string(id), Object: "list", Model: req.Model, Data: make([]ScoreData, len(res.Scores)),
		Usage: EmbeddingUsage{PromptTokens: res.Prompt, TotalTokens: res.Prompt}}
	for i, sc := range res.Scores {
		out.Data[i] = ScoreData{Index: i, Object: "score", Score: sc}
	}
	writeJSON(w, 200, out)
}

// stringOrList reads a string or a non-empty list of strings. Errors:
// ErrBadField.
func stringOrList(raw json.RawMessage, name string) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, ErrBadField.Withf("%s is required", name)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return nil, ErrBadField.Withf("%s: a string or a non-empty list of strings", name)
	}
	return list, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Rerank is POST /v1/rerank over gRPC: the receipt in the cloison-receipt
// trailer, on success only.
func (g *inferenceService) Rerank(ctx context.Context, req *inferencev1.RerankRequest) (*inferencev1.RerankResponse, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	g = g.on(req.GetModel())
	if err := g.checkModel(ctx, req.GetModel()); err != nil {
		return nil, err
	}
	id := grpcRequestID(ctx)
	results, prompt, receipt, err := g.s.rankDocuments(ctx, grpcPrincipal(ctx), id, req.GetModel(), req.GetQuery(), req.GetDocuments(), int(req.GetTopN()), req.GetReturnDocuments())
	if err != nil {
		return nil, err
	}
	out := &inferencev1.RerankResponse{PromptTokens: int64(prompt), RequestId: string(id)}
	for _, r := range results {
		res := &inferencev1.RerankResult{Index: int32(r.Index), RelevanceScore: r.RelevanceScore}
		if r.Document != nil {
			res.Document = r.Document.Text
		}
		out.Results = append(out.Results, res)
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ReceiptKey, receipt))
	return out, nil
}

// Score is POST /v1/score over gRPC (one text_1 against each text_2).
func (g *inferenceService) Score(ctx context.Context, req *inferencev1.ScoreRequest) (*inferencev1.ScoreResponse, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	g = g.on(req.GetModel())
	if err := g.checkModel(ctx, req.GetModel()); err != nil {
		return nil, err
	}
	id := grpcRequestID(ctx)
	q := service.RankRequest{ID: id, Model: req.GetModel()}
	for _, b := range req.GetText_2() {
		q.Pairs = append(q.Pairs, [2]string{req.GetText_1(), b})
	}
	res, err := g.s.req.Rank(ctx, grpcPrincipal(ctx), q)
	if err != nil {
		return nil, err
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ReceiptKey, res.Receipt))
	return &inferencev1.ScoreResponse{Scores: res.Scores, PromptTokens: int64(res.Prompt), RequestId: string(id)}, nil
}
