package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/tenancy"
)

// grpcClients are the three services over one connection to a node.
type grpcClients struct {
	conn       *grpc.ClientConn
	inference  inferencev1.InferenceServiceClient
	admin      adminv1.AdminServiceClient
	compliance compliancev1.ComplianceServiceClient
}

func (n *daemon) grpc() grpcClients {
	n.t.Helper()
	if n.grpcAddr == "" {
		n.t.Fatal("the node serves no gRPC")
	}
	conn, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { conn.Close() })
	return grpcClients{conn: conn, inference: inferencev1.NewInferenceServiceClient(conn), admin: adminv1.NewAdminServiceClient(conn),
		compliance: compliancev1.NewComplianceServiceClient(conn)}
}

// as returns a context carrying token as a bearer token (none when empty).
func as(token string) context.Context {
	ctx := context.Background()
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

// generated is what a Generate stream delivered.
type generated struct {
	text   string
	chunks []*inferencev1.TokenChunk
	final  *inferencev1.Final
	header metadata.MD
	err    error
}

func generate(c grpcClients, token string, req *inferencev1.GenerateRequest) generated {
	var g generated
	stream, err := c.inference.Generate(as(token), req)
	if err != nil {
		g.err = err
		return g
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			g.err = err
			break
		}
		if g.final != nil {
			g.err = errors.New("a message after Final")
			break
		}
		if ch := m.GetChunk(); ch != nil {
			g.chunks = append(g.chunks, ch)
			g.text += ch.GetText()
		}
		if f := m.GetFinal(); f != nil {
			g.final = f
		}
	}
	g.header, _ = stream.Header()
	return g
}

func textPrompt(prompt string, maxTokens int64) *inferencev1.GenerateRequest {
	return &inferencev1.GenerateRequest{Model: modelID, Prompt: &inferencev1.GenerateRequest_Text{Text: prompt}, MaxTokens: i64(maxTokens), Temperature: f64(0)}
}

// ledgerRange reads the ledger rows the token may see over gRPC.
func ledgerRange(t testing.TB, c grpcClients, token string) []*compliancev1.LedgerRow {
	t.Helper()
	stream, err := c.compliance.LedgerRange(as(token), &compliancev1.LedgerRangeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var rows []*compliancev1.LedgerRow
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return rows
		}
		if err != nil {
			t.Fatalf("ledger range: %v", err)
		}
		rows = append(rows, r)
	}
}

func TestE2EGRPCGenerateAndTenantWalls(t *testing.T) {
	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles())
	createTenant(t, db.AdminURL, "acme", nil)
	createTenant(t, db.AdminURL, "globex", nil)
	acme := n.token("acme", time.Hour, tenancy.ScopeInfer, tenancy.ScopeComplianceRead)
	globex := n.token("globex", time.Hour, tenancy.ScopeInfer, tenancy.ScopeComplianceRead)
	admin := n.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead, tenancy.ScopeComplianceWrite)
	c := n.grpc()

	// A streamed generation: tokens, then one Final with usage, after the
	// request is in the ledger.
	g := generate(c, acme, textPrompt("aaab", 6))
	if g.err != nil || g.final == nil || g.text != "aaaaaa" || len(g.chunks) != 6 {
		t.Fatalf("generate: err %v final %v text %q chunks %d", g.err, g.final, g.text, len(g.chunks))
	}
	u := g.final.GetUsage()
	if g.final.GetFinishReason() != "length" || u.GetCompletionTokens() != 6 || u.GetPromptTokens() < 4 || u.GetTotalTokens() != u.GetPromptTokens()+6 {
		t.Fatalf("final: %v", g.final)
	}
	if got := g.header.Get("x-cloison-decision-id"); len(got) != 1 || got[0] == "" || got[0] != g.final.GetDecisionId() {
		t.Fatalf("decision id header %v, final %q", got, g.final.GetDecisionId())
	}
	if got := g.header.Get("x-request-id"); len(got) != 1 || got[0] != g.final.GetRequestId() {
		t.Fatalf("request id header %v, final %q", got, g.final.GetRequestId())
	}
	for _, ch := range g.chunks {
		if ch.GetTokenId() < 0 || ch.GetLogprob() != nil {
			t.Fatalf("chunk without logprobs asked: %v", ch)
		}
	}
	// Chat messages, logprobs with alternatives, token ids.
	g = generate(c, globex, &inferencev1.GenerateRequest{Model: modelID, Prompt: &inferencev1.GenerateRequest_Chat{Chat: &inferencev1.ChatMessages{
		Messages: []*inferencev1.ChatMessage{{Role: "user", Content: "zzy"}}}}, MaxTokens: i64(3), Temperature: f64(0), Logprobs: true, TopLogprobs: 2})
	if g.err != nil || g.final == nil || len(g.chunks) == 0 {
		t.Fatalf("chat generate: %v %v", g.err, g.final)
	}
	for _, ch := range g.chunks {
		if ch.GetTokenId() >= 0 && (ch.GetLogprob() == nil || len(ch.GetTopLogprobs()) != 2 || ch.GetLogprob().GetTokenId() != ch.GetTokenId()) {
			t.Fatalf("chunk logprobs: %v", ch)
		}
	}
	tok, err := c.inference.Tokenize(as(acme), &inferencev1.TokenizeRequest{Model: modelID, Input: &inferencev1.TokenizeRequest_Text{Text: "zzy"}})
	if err != nil || tok.GetCount() != int64(len(tok.GetIds())) || tok.GetMaxContext() == 0 {
		t.Fatalf("tokenize: %v %v", tok, err)
	}
	g = generate(c, acme, &inferencev1.GenerateRequest{Model: modelID, Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: tok.GetIds()}},
		MaxTokens: i64(3), Temperature: f64(0)})
	if g.err != nil || g.text != "zzz" {
		t.Fatalf("token-id generate: %v %q", g.err, g.text)
	}
	models, err := c.inference.ListModels(as(acme), &inferencev1.ListModelsRequest{})
	if err != nil || len(models.GetModels()) != 1 || models.GetModels()[0].GetId() != modelID || models.GetModels()[0].GetContextLength() == 0 {
		t.Fatalf("list models: %v %v", models, err)
	}
	if att, err := c.inference.GetAttestation(as(globex), &inferencev1.GetAttestationRequest{}); err != nil || !att.GetOk() || att.GetPoolPages() != 256 {
		t.Fatalf("attestation: %v %v", att, err)
	}

	// Each tenant sees only its own ledger rows; the admin sees the whole
	// chain, and every row's hash is computed over its payload bytes.
	for tok, want := range map[string]string{acme: "acme", globex: "globex"} {
		rows := ledgerRange(t, c, tok)
		kinds := map[string]bool{}
		for _, r := range rows {
			if r.GetTenant() != want {
				t.Fatalf("tenant %s sees a row of %q", want, r.GetTenant())
			}
			kinds[r.GetKind()] = true
			if strings.Contains(string(r.GetPayload()), "aaab") || strings.Contains(string(r.GetPayload()), "zzy") {
				t.Fatalf("the ledger holds prompt text: %s", r.GetPayload())
			}
		}
		if !kinds["policy.decision"] || !kinds["request.completed"] {
			t.Fatalf("%s's rows lack policy.decision or request.completed: %v", want, kinds)
		}
	}
	// Before serving, the node records only admin changes (its signing
	// keys' creation, tenants) and where event signatures begin
	// (ledger.signing_began): the first other event is the attestation.
	all := ledgerRange(t, c, admin)
	first := ""
	for _, r := range all {
		if k := r.GetKind(); !strings.HasPrefix(k, "key.") && !strings.HasPrefix(k, "tenant.") && k != string(audit.KindSigningBegan) {
			first = k
			break
		}
	}
	if first != "capacity.attestation" {
		t.Fatalf("admin's ledger range: %d rows, first non-admin event %q, want capacity.attestation", len(all), first)
	}
	for i, r := range all {
		var prev, hash audit.Digest
		copy(prev[:], r.GetPrevHash())
		copy(hash[:], r.GetHash())
		if r.GetSeq() != uint64(i+1) || audit.HashEvent(r.GetSeq(), prev, r.GetPayload()) != hash || (i > 0 && !slices.Equal(r.GetPrevHash(), all[i-1].GetHash())) {
			t.Fatalf("row %d does not chain over its exact payload bytes", r.GetSeq())
		}
	}
	completed := 0
	for _, r := range all {
		if r.GetKind() == "request.completed" {
			completed++
		}
	}
	if completed != 3 {
		t.Fatalf("%d request.completed rows for 3 generations", completed)
	}

	// An incident affecting acme, opened over gRPC: globex can neither list
	// nor read it.
	inc, _ := json.Marshal(map[string]any{"status": "open", "circumstances": "grpc e2e test", "personal_info_undescribed": "test data only",
		"occurred": map[string]any{"start": "2026-11-29"}, "awareness": map[string]any{"start": "2026-11-29"},
		"persons_concerned": 0, "assessment": map[string]any{"status": "pending"}, "affected_tenants": []string{"acme"},
		"organization": map[string]any{"name": "Cloison e2e"}, "contact": map[string]any{"name": "DPO", "email": "dpo@example.test"}})
	if _, err := c.compliance.OpenIncident(as(acme), &compliancev1.OpenIncidentRequest{VersionJson: inc}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a tenant opening an incident: %v", err)
	}
	opened, err := c.compliance.OpenIncident(as(admin), &compliancev1.OpenIncidentRequest{VersionJson: inc})
	if err != nil || opened.GetIncident() == "" || opened.GetVersion() != 1 {
		t.Fatalf("open incident: %v %v", opened, err)
	}
	id := opened.GetIncident()
	if got, err := c.compliance.GetIncident(as(acme), &compliancev1.GetIncidentRequest{Id: id}); err != nil || got.GetId() != id || got.GetVersions() != 1 {
		t.Fatalf("acme reading its incident: %v %v", got, err)
	}
	if _, err := c.compliance.GetIncident(as(globex), &compliancev1.GetIncidentRequest{Id: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("globex reading acme's incident: %v", err)
	}
	if l, err := c.compliance.ListIncidents(as(globex), &compliancev1.ListIncidentsRequest{}); err != nil || len(l.GetIncidents()) != 0 {
		t.Fatalf("globex lists acme's incident: %v %v", l, err)
	}
	if l, err := c.compliance.ListIncidents(as(acme), &compliancev1.ListIncidentsRequest{}); err != nil || len(l.GetIncidents()) != 1 {
		t.Fatalf("acme's incidents: %v %v", l, err)
	}
	upd, err := c.compliance.UpdateIncident(as(admin), &compliancev1.UpdateIncidentRequest{Id: id, PatchJson: []byte(`{"circumstances":"grpc e2e test, updated"}`)})
	if err != nil || upd.GetVersion() != 2 {
		t.Fatalf("update incident: %v %v", upd, err)
	}
	// The admin API over gRPC.
	ts, err := c.admin.ListTenants(as(admin), &adminv1.ListTenantsRequest{})
	if err != nil || len(ts.GetTenants()) < 2 {
		t.Fatalf("list tenants: %v %v", ts, err)
	}
	created, err := c.admin.CreateTenant(as(admin), &adminv1.CreateTenantRequest{Tenant: &adminv1.Tenant{Id: "initech", Name: "Initech",
		Classification: "personal", AllowedModels: []string{modelID}, IncidentContact: "dpo@initech.test",
		Quotas: &adminv1.Quotas{MaxConcurrent: 4, KvPages: 32, TokensPerMinute: 100000, MaxContext: 1024}}})
	if err != nil || created.GetTier() != "dedicated" || created.GetZeroing() != "always" || created.GetStatus() != "active" {
		t.Fatalf("create tenant: %v %v", created, err)
	}
	if s, err := c.admin.SuspendTenant(as(admin), &adminv1.SuspendTenantRequest{Id: "initech"}); err != nil || s.GetStatus() != "suspended" {
		t.Fatalf("suspend: %v %v", s, err)
	}
	pool, err := c.admin.PoolStatus(as(admin), &adminv1.PoolStatusRequest{})
	if err != nil || pool.GetPool().GetPages() != 256 || !pool.GetAttestation().GetOk() {
		t.Fatalf("pool status: %v %v", pool, err)
	}
	if v, err := c.compliance.VerifyLedger(as(admin), &compliancev1.VerifyLedgerRequest{}); err != nil || !v.GetOk() {
		t.Fatalf("verify: %v %v", v, err)
	}

	// A signed export, streamed over gRPC, verifies offline; a tenant
	// cannot export (it would hold every tenant's rows).
	if err := exportTo(c, acme, t.TempDir()); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("tenant export: %v", err)
	}
	dir := t.TempDir()
	if err := exportTo(c, admin, dir); err != nil {
		t.Fatalf("export: %v", err)
	}
	key, err := keyfile.PrivateOrCreate(filepath.Join(n.stateDir, "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	keys := audit.KeySet(key.Public().(ed25519.PublicKey))
	if rep, err := export.VerifyDir(dir, keys, keys); err != nil {
		t.Fatalf("the export does not verify: %v (%+v)", err, rep)
	}
}

// exportTo writes the files of a gRPC Export into dir.
func exportTo(c grpcClients, token, dir string) error {
	stream, err := c.compliance.Export(as(token), &compliancev1.ExportRequest{})
	if err != nil {
		return err
	}
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for {
		ch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		f := files[ch.GetName()]
		if f == nil {
			if filepath.Base(ch.GetName()) != ch.GetName() {
				return fmt.Errorf("export file name %q", ch.GetName())
			}
			if f, err = os.Create(filepath.Join(dir, ch.GetName())); err != nil {
				return err
			}
			files[ch.GetName()] = f
		}
		if _, err := f.WriteAt(ch.GetData(), int64(ch.GetOffset())); err != nil {
			return err
		}
	}
}

func TestE2EGRPCAuthHealthReflection(t *testing.T) {
	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles())
	createTenant(t, db.AdminURL, "acme", nil)
	createTenant(t, db.AdminURL, "sleepy", nil)
	c := n.grpc()
	good := n.token("acme", time.Hour, tenancy.ScopeInfer)
	sleepy := n.token("sleepy", time.Hour, tenancy.ScopeInfer)
	if _, err := adminStore(t, db.AdminURL).SetStatus(context.Background(), "sleepy", tenancy.StatusSuspended); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	tests := []struct {
		name  string
		token string
		code  codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"garbage", "not.a.jwt", codes.Unauthenticated},
		{"tampered payload", parts[0] + "." + parts[1] + "x." + parts[2], codes.Unauthenticated},
		{"alg none", "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + ".", codes.Unauthenticated},
		{"unknown tenant", n.token("nobody", time.Hour, tenancy.ScopeInfer), codes.Unauthenticated},
		{"suspended tenant", sleepy, codes.PermissionDenied},
		{"scope not granted", n.token("acme", time.Hour, tenancy.ScopeComplianceRead), codes.PermissionDenied},
		{"valid", good, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := generate(c, tt.token, textPrompt("hi", 2))
			if status.Code(g.err) != tt.code {
				t.Fatalf("got %v, want %v", g.err, tt.code)
			}
			if tt.code != codes.OK && (g.final != nil || len(g.chunks) != 0) {
				t.Fatalf("a refused request got output: %v", g.chunks)
			}
			if tt.code != codes.OK && len(g.header.Get("x-request-id")) != 1 {
				t.Fatalf("no x-request-id on a refusal: %v", g.header)
			}
		})
	}
	// Unary methods and the other services check their scopes too.
	infer := n.token("acme", time.Hour, tenancy.ScopeInfer, tenancy.ScopeComplianceRead)
	if _, err := c.admin.ListTenants(as(infer), &adminv1.ListTenantsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("admin without the admin scope: %v", err)
	}
	if _, err := c.compliance.VerifyLedger(as(infer), &compliancev1.VerifyLedgerRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("verify without admin: %v", err)
	}
	if _, err := c.inference.ListModels(as(""), &inferencev1.ListModelsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("list models without a token: %v", err)
	}
	if _, err := c.compliance.ListIncidents(as(good), &compliancev1.ListIncidentsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("incidents without compliance:read: %v", err)
	}

	// Health needs no token and reports SERVING, overall and per service.
	h := healthpb.NewHealthClient(c.conn)
	for _, svc := range []string{"", "cloison.inference.v1.InferenceService", "cloison.compliance.v1.ComplianceService"} {
		r, err := h.Check(as(""), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, r, err)
		}
	}
	// Reflection needs no token and lists the services.
	rs, err := reflectionpb.NewServerReflectionClient(c.conn).ServerReflectionInfo(as(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"cloison.inference.v1.InferenceService", "cloison.admin.v1.AdminService", "cloison.compliance.v1.ComplianceService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
	_ = rs.CloseSend()

	// Shutdown drains: a stream in flight when cloisond is told to stop
	// still ends with its Final, then the process exits cleanly.
	stream, err := c.inference.Generate(as(good), textPrompt("ab", 600))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var final *inferencev1.Final
	chunks := 1
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("stream during shutdown: %v", err)
		}
		if m.GetFinal() != nil {
			final = m.GetFinal()
		} else {
			chunks++
		}
	}
	if final == nil || final.GetUsage().GetCompletionTokens() != int64(chunks) {
		t.Fatalf("drained stream: final %v after %d chunks", final, chunks)
	}
	select {
	case err := <-n.done:
		if err != nil {
			t.Fatalf("cloisond exit: %v\n%s", err, n.logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("cloisond did not exit\n%s", n.logs)
	}
}

func TestE2EGRPCRejectBeforeAllocate(t *testing.T) {
	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles())
	createTenant(t, db.AdminURL, "acme", nil)
	c := n.grpc()
	acme := n.token("acme", time.Hour, tenancy.ScopeInfer)
	admin := n.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	tests := []struct {
		name string
		req  *inferencev1.GenerateRequest
		code codes.Code
		msg  string
	}{
		{"over-long prompt", textPrompt(strings.Repeat("ab", 3000), 10), codes.InvalidArgument, "context_length_exceeded"},
		{"huge max_tokens", textPrompt("x", 1<<53), codes.InvalidArgument, "context_length_exceeded"},
		{"negative max_tokens", textPrompt("x", -1), codes.InvalidArgument, "invalid_request_error"},
		{"unknown model", &inferencev1.GenerateRequest{Model: "gpt-9", Prompt: &inferencev1.GenerateRequest_Text{Text: "x"}}, codes.NotFound, "model_not_found"},
		{"no prompt", &inferencev1.GenerateRequest{Model: modelID}, codes.InvalidArgument, "invalid_request_error"},
		{"temperature out of range", &inferencev1.GenerateRequest{Model: modelID, Prompt: &inferencev1.GenerateRequest_Text{Text: "x"}, Temperature: f64(5)}, codes.InvalidArgument, "invalid_request_error"},
		{"negative token id", &inferencev1.GenerateRequest{Model: modelID, Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: []int32{1, -2}}}}, codes.InvalidArgument, "invalid_request_error"},
		// Refused by gRPC itself on the message's length prefix, unread
		// (--max-request-bytes): its own status, no ErrorInfo.
		{"oversized prompt", textPrompt(strings.Repeat("a", 2<<20), 1), codes.ResourceExhausted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := generate(c, acme, tt.req)
			// The cloison code travels as an ErrorInfo detail, not in the text.
			if got, _ := rpcerr.Code(g.err); status.Code(g.err) != tt.code || string(got) != tt.msg {
				t.Fatalf("got %v (code %q), want %v with %q", g.err, got, tt.code, tt.msg)
			}
			if g.final != nil || len(g.chunks) != 0 {
				t.Fatalf("a rejected request got output")
			}
		})
	}
	// Nothing above leased a page or completed a request; the over-long
	// prompts are ledgered as rejected before allocation.
	pool, err := c.admin.PoolStatus(as(admin), &adminv1.PoolStatusRequest{})
	if err != nil || pool.GetPool().GetLeased() != 0 {
		t.Fatalf("pool after rejections: %v %v", pool, err)
	}
	for _, tp := range pool.GetPool().GetTenants() {
		if tp.GetLeased() != 0 || tp.GetLeases() != 0 {
			t.Fatalf("tenant %s holds pages after rejections: %v", tp.GetTenant(), tp)
		}
	}
	// The two over-long requests are counted as refused for their length
	// in policy.refusals summaries (one row per flush, not per request).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		refused := 0
		for _, r := range ledgerRange(t, c, admin) {
			var p struct {
				Data struct {
					Counts []struct {
						Code  string `json:"code"`
						Count int    `json:"count"`
					} `json:"counts"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.GetPayload(), &p); err != nil {
				t.Fatal(err)
			}
			switch r.GetKind() {
			case "request.completed":
				t.Fatalf("a rejected request was served: %s", r.GetPayload())
			case "policy.refusals":
				for _, c := range p.Data.Counts {
					if c.Code == string(cloison.CodeContextLengthExceeded) {
						refused += c.Count
					}
				}
			}
		}
		if refused > 2 {
			t.Fatalf("%d length refusals in the ledger, want 2", refused)
		}
		if refused == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d length refusals in the ledger, want 2", refused)
		}
	}
	// The server still serves.
	if g := generate(c, acme, textPrompt("ok", 2)); g.err != nil || g.final == nil {
		t.Fatalf("after rejections: %v", g.err)
	}

	// A client that goes away mid-stream: the request is cancelled, its
	// pages come back, and it is ledgered as cancelled (not completed).
	ctx, cancel := context.WithCancel(as(acme))
	stream, err := c.inference.Generate(ctx, textPrompt("ab", 1000))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var canceled bool
		for _, r := range ledgerRange(t, c, admin) {
			if r.GetKind() == "request.completed" && strings.Contains(string(r.GetPayload()), `"status":"canceled"`) {
				canceled = true
			}
		}
		pool, err := c.admin.PoolStatus(as(admin), &adminv1.PoolStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		leases := 0
		for _, tp := range pool.GetPool().GetTenants() {
			leases += int(tp.GetLeases())
		}
		if canceled && pool.GetPool().GetLeased() == 0 && leases == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a client cancel: ledgered canceled %v, pool %v", canceled, pool.GetPool())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Fail closed over gRPC too: with PostgreSQL stopped Generate is
// UNAVAILABLE (no unaudited service) and health is NOT_SERVING; both come
// back by themselves with the database.
func TestE2EGRPCLedgerOutage(t *testing.T) {
	root, err := pgtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CLOISON_PG_PRIVATE=1", "CLOISON_PG_DIR="+t.TempDir(), fmt.Sprintf("CLOISON_PG_PORT=%d", freePort(t)))
	pg := func(args ...string) string {
		cmd := exec.Command(filepath.Join(root, "scripts", "pg.sh"), args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pg.sh %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	url := pg()
	t.Cleanup(func() { pg("stop") })
	n := startNode(t, url, nil)
	createTenant(t, url, "acme", nil)
	tok := n.token("acme", time.Hour, tenancy.ScopeInfer)
	c := n.grpc()
	h := healthpb.NewHealthClient(c.conn)
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		r, err := h.Check(as(""), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		return r.GetStatus()
	}
	if g := generate(c, tok, textPrompt("abc", 2)); g.err != nil || g.final == nil {
		t.Fatalf("before the outage: %v", g.err)
	}
	pg("stop")
	g := generate(c, tok, textPrompt("abc", 2))
	if status.Code(g.err) != codes.Unavailable || g.final != nil || len(g.chunks) != 0 {
		t.Fatalf("during the outage: %v, %d chunks, want UNAVAILABLE and no output\n%s", g.err, len(g.chunks), n.logs)
	}
	if st := health(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during the outage: %v", st)
	}
	pg()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := generate(c, tok, textPrompt("abc", 2))
		if g.err == nil && g.final != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service did not resume: %v", g.err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if st := health(); st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health after the outage: %v", st)
	}
}
