package api_test

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// encoder is a small synthetic BERT with the given pooling (1 mean, 2 CLS,
// 4 rank).
func encoder(pooling int) *synth.BertConfig {
	return &synth.BertConfig{Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 512, DType: gguf.F32, Pooling: pooling}
}

func rerankCall(t *testing.T, p *platformtest.Platform, tok, body string) api.RerankResponse {
	t.Helper()
	code, _, b := call(t, p, "POST", "/v1/rerank", tok, body)
	var r api.RerankResponse
	if err := json.Unmarshal(b, &r); code != 200 || err != nil {
		t.Fatalf("rerank: %d %s (%v)", code, b, err)
	}
	return r
}

func scoreCall(t *testing.T, p *platformtest.Platform, tok, body string) api.ScoreResponse {
	t.Helper()
	code, _, b := call(t, p, "POST", "/v1/score", tok, body)
	var r api.ScoreResponse
	if err := json.Unmarshal(b, &r); code != 200 || err != nil || r.Object != "list" {
		t.Fatalf("score: %d %s (%v)", code, b, err)
	}
	return r
}

// TestEncoderEmbeddings: a BERT-family model serves /v1/embeddings (CLS
// pooling, WordPiece with [CLS] … [SEP]): unit vectors of the model's
// width, the same bits alone, in a list and over gRPC; it generates
// nothing (completions refused with a typed 400).
func TestEncoderEmbeddings(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Encoder: encoder(2)})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	m := `"model":"` + platformtest.Model + `"`
	const a = "The cat sat on the mat."
	alone, ans := embed(t, p, tok, `{`+m+`,"input":"`+a+`"}`)
	ids := p.Tokenizer.Encode(a, true, false)
	if ids[0] != synth.BertCLS || ids[len(ids)-1] != synth.BertSep || ans.Usage.PromptTokens != len(ids) {
		t.Fatalf("tokens %v, usage %+v", ids, ans.Usage)
	}
	// /tokenize serves the WordPiece vocabulary: the ids embeddings cost.
	code, _, tb := call(t, p, "POST", "/tokenize", tok, `{`+m+`,"prompt":"`+a+`"}`)
	var tk struct {
		Count  int     `json:"count"`
		Tokens []int32 `json:"tokens"`
	}
	if err := json.Unmarshal(tb, &tk); code != 200 || err != nil || !slices.Equal(tk.Tokens, ids) || tk.Count != len(ids) {
		t.Fatalf("tokenize: %d %s, want %v", code, tb, ids)
	}
	if n := norm(alone[0]); len(alone[0]) != 64 || math.Abs(n-1) > 1e-5 {
		t.Fatalf("vector of %d values, norm %v", len(alone[0]), n)
	}
	list, _ := embed(t, p, tok, `{`+m+`,"input":["a dog in paris","`+a+`"]}`)
	if !sameBits(list[1], alone[0]) || sameBits(list[0], list[1]) {
		t.Fatal("a vector depends on its list neighbours")
	}
	conn, gctx := p.GRPC(t)
	gctx = metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+tok)
	res, err := inferencev1.NewInferenceServiceClient(conn).Embed(gctx, &inferencev1.EmbedRequest{Model: platformtest.Model, Texts: []string{a}})
	if err != nil || !sameBits(res.GetVectors()[0].GetValues(), alone[0]) {
		t.Fatalf("gRPC Embed: %v", err)
	}
	code, eb, b := call(t, p, "POST", "/v1/completions", tok, `{`+m+`,"prompt":"hello","max_tokens":4}`)
	if code != 400 || eb.Error.Code != "unsupported" || !strings.Contains(eb.Error.Message, "encoder") {
		t.Fatalf("completion on an encoder: %d %s", code, b)
	}
	// Rerank needs a classification head.
	code, eb, b = call(t, p, "POST", "/v1/rerank", tok, `{`+m+`,"query":"cat","documents":["a cat"]}`)
	if code != 400 || eb.Error.Code != "unsupported" || !strings.Contains(eb.Error.Message, "classification head") {
		t.Fatalf("rerank on an embedding model: %d %s", code, b)
	}
}

// TestRerank: a cross-encoder (pooling rank) scores each document against
// the query: /v1/rerank sorts by score (top_n, return_documents),
// /v1/score gives the same bits per pair, and so does gRPC; a pair's score
// is the same alone, in any list and beside another tenant's requests;
// usage counts [CLS] q [SEP] d [SEP] per pair (a request whose pairs
// together exceed the context runs: each pair is a sequence of its own);
// the ledger holds counts
// and digests, never text.
func TestRerank(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "other"}, Encoder: encoder(4)})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	m := `"model":"` + platformtest.Model + `"`
	from := head(t, p)
	const q = "what is the capital of france"
	docs := []string{"paris is the capital of france", "the cat sat on the mat", "a river of water", "zebra quilt"}
	dj, _ := json.Marshal(docs)
	all := rerankCall(t, p, tok, `{`+m+`,"query":"`+q+`","documents":`+string(dj)+`}`)
	if len(all.Results) != len(docs) || all.Model != platformtest.Model || all.ID == "" {
		t.Fatalf("rerank: %+v", all)
	}
	want := 0
	for _, d := range docs {
		want += len(p.Tokenizer.Encode(q, true, false)) + len(p.Tokenizer.Encode(d, false, false)) + 1
	}
	if all.Usage.PromptTokens != want || all.Usage.TotalTokens != want {
		t.Fatalf("usage %+v, want %d tokens", all.Usage, want)
	}
	scores := make([]float32, len(docs))
	var seen []int
	for i, r := range all.Results {
		if i > 0 && r.RelevanceScore > all.Results[i-1].RelevanceScore || r.Document != nil {
			t.Fatalf("results not sorted or with documents: %+v", all.Results)
		}
		scores[r.Index] = r.RelevanceScore
		seen = append(seen, r.Index)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []int{0, 1, 2, 3}) {
		t.Fatalf("indices %v", seen)
	}
	top := rerankCall(t, p, tok, `{`+m+`,"query":"`+q+`","documents":[{"text":"`+docs[2]+`"},"`+docs[0]+`"],"top_n":1,"return_documents":true}`)
	best := 1 // the request's documents are docs[2], docs[0]
	if scores[2] > scores[0] {
		best = 0
	}
	if len(top.Results) != 1 || top.Results[0].Index != best || top.Results[0].Document == nil ||
		top.Results[0].Document.Text != docs[[]int{2, 0}[best]] || top.Results[0].RelevanceScore != scores[[]int{2, 0}[best]] {
		t.Fatalf("top_n 1 with documents: %+v (scores %v)", top.Results, scores)
	}
	sc := scoreCall(t, p, tok, `{`+m+`,"text_1":"`+q+`","text_2":`+string(dj)+`}`)
	zipped := scoreCall(t, p, tok, `{`+m+`,"text_1":["`+q+`","`+q+`"],"text_2":["`+docs[3]+`","`+docs[1]+`"]}`)
	if len(sc.Data) != len(docs) || zipped.Data[0].Score != scores[3] || zipped.Data[1].Score != scores[1] {
		t.Fatalf("score: %+v %+v, rerank's %v", sc.Data, zipped.Data, scores)
	}
	for i, d := range sc.Data {
		if d.Index != i || d.Object != "score" || math.Float32bits(d.Score) != math.Float32bits(scores[i]) {
			t.Fatalf("score data %d: %+v, want rerank's %v", i, d, scores[i])
		}
	}

	t.Run("grpc", func(t *testing.T) {
		conn, gctx := p.GRPC(t)
		gctx = metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+tok)
		c := inferencev1.NewInferenceServiceClient(conn)
		var trailer metadata.MD
		rr, err := c.Rerank(gctx, &inferencev1.RerankRequest{Model: platformtest.Model, Query: q, Documents: docs, TopN: 2, ReturnDocuments: true}, grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		if len(rr.GetResults()) != 2 || len(trailer.Get(api.ReceiptKey)) != 1 || rr.GetPromptTokens() != int64(want) {
			t.Fatalf("gRPC Rerank: %v", rr)
		}
		for i, r := range rr.GetResults() {
			if r.GetIndex() != int32(all.Results[i].Index) || r.GetRelevanceScore() != all.Results[i].RelevanceScore || r.GetDocument() != docs[r.GetIndex()] {
				t.Fatalf("gRPC result %d: %v, HTTP %+v", i, r, all.Results[i])
			}
		}
		sr, err := c.Score(gctx, &inferencev1.ScoreRequest{Model: platformtest.Model, Text_1: q, Text_2: docs})
		if err != nil || !slices.Equal(sr.GetScores(), scores) {
			t.Fatalf("gRPC Score: %v %v, want %v", sr.GetScores(), err, scores)
		}
		_, err = c.Rerank(gctx, &inferencev1.RerankRequest{Model: platformtest.Model, Query: q})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("gRPC Rerank without documents: %v", err)
		}
		_, err = c.Embed(gctx, &inferencev1.EmbedRequest{Model: platformtest.Model, Texts: []string{q}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "reranker") {
			t.Fatalf("gRPC Embed on a reranker: %v", err)
		}
	})

	t.Run("batch neighbours", func(t *testing.T) { checkScoresAlone(t, p, tok, m, q, docs[0], scores[0]) })
	t.Run("ledger", func(t *testing.T) { checkRankLedger(t, p, from, q, docs, want, 1) })
}

// TestRerankRefusals: bad bodies are a typed 400 naming the field; an
// unknown field is refused; a model without a rank head refuses rerank
// and score; tokens are charged against the tenant's quota (429 once
// spent).
func TestRerankRefusals(t *testing.T) {
	q := tenancy.Quotas{MaxConcurrent: 4, KVPages: 64, TokensPerMinute: 60, MaxContext: 512}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Encoder: encoder(4), Quotas: &q})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	m := `"model":"` + platformtest.Model + `"`
	for _, tc := range []struct{ path, body string }{
		{"/v1/rerank", `{` + m + `,"documents":["a"]}`},
		{"/v1/rerank", `{` + m + `,"query":"a"}`},
		{"/v1/rerank", `{` + m + `,"query":"a","documents":[]}`},
		{"/v1/rerank", `{` + m + `,"query":"a","documents":[1]}`},
		{"/v1/rerank", `{` + m + `,"query":"a","documents":[{"text":"a","title":"b"}]}`},
		{"/v1/rerank", `{` + m + `,"query":"a","documents":[""]}`},
		{"/v1/rerank", `{` + m + `,"query":"","documents":["a"]}`},
		{"/v1/rerank", `{` + m + `,"query":"a","documents":["a"],"top_n":-1}`},
		{"/v1/score", `{` + m + `,"text_1":"a"}`},
		{"/v1/score", `{` + m + `,"text_1":["a","b"],"text_2":["a","b","c"]}`},
		{"/v1/score", `{` + m + `,"text_1":"a","text_2":[]}`},
	} {
		if code, eb, b := call(t, p, "POST", tc.path, tok, tc.body); code != 400 || eb.Error.Code != "invalid_request_error" {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, code, b)
		}
	}
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/rerank", `{` + m + `,"query":"a","documents":["a"],"rank_fields":["text"]}`, "rank_fields"},
		{"/v1/score", `{` + m + `,"text_1":"a","text_2":"b","truncate_prompt_tokens":8}`, "truncate_prompt_tokens"},
	} {
		if code, eb, b := call(t, p, "POST", tc.path, tok, tc.body); code != 400 || eb.Error.Code != "unsupported" || !strings.Contains(eb.Error.Message, tc.field) {
			t.Errorf("unknown field %s: %d %s", tc.field, code, b)
		}
	}
	body := `{` + m + `,"text_1":"` + strings.Repeat("a ", 25) + `","text_2":"b"}`
	scoreCall(t, p, tok, body)
	scoreCall(t, p, tok, body)
	if code, _, b := call(t, p, "POST", "/v1/score", tok, body); code != 429 {
		t.Fatalf("third request over 60 tokens a minute: %d %s", code, b)
	}

	plain := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Pooling: 1})
	for _, path := range []string{"/v1/rerank", "/v1/score"} {
		body := `{` + m + `,"query":"a","documents":["b"]}`
		if path == "/v1/score" {
			body = `{` + m + `,"text_1":"a","text_2":"b"}`
		}
		code, eb, b := call(t, plain, "POST", path, plain.Token(t, "victim", tenancy.ScopeInfer), body)
		if code != 400 || eb.Error.Code != "unsupported" || !strings.Contains(eb.Error.Message, "rerank") {
			t.Errorf("%s on a decoder embedding model: %d %s", path, code, b)
		}
	}
}

// checkScoresAlone: the score of (q, doc) is firstScore's bits while another
// tenant reranks beside it, three times (batch invariance across tenants).
func checkScoresAlone(t *testing.T, p *platformtest.Platform, tok, m, q, doc string, firstScore float32) {
	t.Helper()
	other := p.Token(t, "other", tenancy.ScopeInfer)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 3 {
			rerankCall(t, p, other, `{`+m+`,"query":"`+strings.Repeat("zebra ", 60)+`","documents":["quilt","tree","dog"]}`)
		}
	}()
	for range 3 {
		got := scoreCall(t, p, tok, `{`+m+`,"text_1":"`+q+`","text_2":["zebra quilt","`+doc+`"]}`)
		if math.Float32bits(got.Data[1].Score) != math.Float32bits(firstScore) {
			t.Error("a score changed with its batch neighbours")
		}
	}
	wg.Wait()
}

// checkRankLedger: no ledger row since from holds the query's or a
// document's text; victim's first request.completed counts want prompt
// tokens, len(docs) inputs of dims dimensions under the rank operation; at
// least four were recorded.
func checkRankLedger(t *testing.T, p *platformtest.Platform, from uint64, q string, docs []string, want, dims int) {
	t.Helper()
	n := 0
	for _, r := range rows(t, p, from) {
		for _, s := range append(docs, q) {
			if strings.Contains(string(r.Payload), s) {
				t.Fatalf("ledger row %s holds text %q", r.Kind, s)
			}
		}
		if r.Kind != audit.KindRequestCompleted || r.Tenant != "victim" {
			continue
		}
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := env.DecodePayload()
		if err != nil {
			t.Fatal(err)
		}
		rc := pl.(*audit.RequestCompleted)
		if n == 0 && (rc.PromptTokens != int64(want) || rc.Embedding == nil || rc.Embedding.Inputs != int64(len(docs)) ||
			rc.Embedding.Dimensions != int64(dims) || rc.Embedding.Operation != audit.OperationRank) {
			t.Fatalf("first request.completed %+v (embedding %+v)", rc, rc.Embedding)
		}
		n++
	}
	if n < 4 {
		t.Fatalf("%d request.completed rows", n)
	}
}
