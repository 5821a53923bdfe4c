package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	tlogv1 "github.com/cloison/cloison/api/proto/cloison/tlog/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// tlogPlatform is a platform whose ledger holds interleaved entries of
// alpha and bravo (alpha's at every third seq), signed; it returns the
// global seqs of alpha's entries.
func tlogPlatform(t *testing.T) (*platformtest.Platform, []uint64) {
	t.Helper()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	ctx := context.Background()
	var alphaSeqs []uint64
	for i := 1; i <= 30; i++ {
		tn := cloison.TenantID("bravo")
		if i%3 == 0 {
			tn = "alpha"
		}
		_, err := p.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: tn, Actor: "engine:tlog-test",
			Payload: audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("req-%d", i)), Model: "m", PromptTokens: int64(i),
				CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	// alpha's entries: these and the platform's own about alpha (tenant.created).
	if err := p.Ledger.Scan(ctx, 1, 0, func(r audit.Record) error {
		if audit.TenantVisible(r, "alpha") {
			alphaSeqs = append(alphaSeqs, r.Seq)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return p, alphaSeqs
}

func get(t *testing.T, url, token, accept string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return doReq(t, req)
}

func doReq(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// The log is checkable without trusting Cloison: an outsider holding only the
// published verifier key checks a checkpoint fetched over HTTP, an inclusion
// proof and a consistency proof, with golang.org/x/mod/sumdb/note and tlog
// alone (the outsider's part below uses nothing of Cloison's).
func TestThirdPartyVerifiesOverHTTP(t *testing.T) {
	p, _ := tlogPlatform(t)
	published, err := p.Ledger.TreeVerifierKey() // handed out of band
	if err != nil {
		t.Fatal(err)
	}
	auditor := p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	if code, body := get(t, p.URL+"/compliance/v1/tlog/key", "", ""); code != 200 || strings.TrimSpace(string(body)) != published {
		t.Fatalf("key: got %d %q, want the published key", code, body)
	}
	code, msg := get(t, p.URL+"/compliance/v1/tlog/checkpoint", auditor, "")
	if code != 200 {
		t.Fatalf("checkpoint: got %d %s", code, msg)
	}

	// The outsider's side.
	v, err := note.NewVerifier(published)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || lines[0] != v.Name() {
		t.Fatalf("checkpoint %q", n.Text)
	}
	var root tlog.Hash
	rb, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(rb) != tlog.HashSize {
		t.Fatalf("root %q", lines[2])
	}
	copy(root[:], rb)
	hashes := func(in []string) []tlog.Hash {
		out := make([]tlog.Hash, len(in))
		for i, s := range in {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(b) != tlog.HashSize {
				t.Fatalf("proof hash %q", s)
			}
			copy(out[i][:], b)
		}
		return out
	}
	for _, seq := range []int64{1, 7, size} {
		code, body := get(t, fmt.Sprintf("%s/compliance/v1/tlog/inclusion?seq=%d&tree_size=%d", p.URL, seq, size), auditor, "")
		var ip struct {
			Payload json.RawMessage `json:"payload"`
			Proof   []string        `json:"proof"`
		}
		if code != 200 || json.Unmarshal(body, &ip) != nil {
			t.Fatalf("inclusion %d: got %d %s", seq, code, body)
		}
		if err := tlog.CheckRecord(hashes(ip.Proof), size, root, seq-1, tlog.RecordHash(ip.Payload)); err != nil {
			t.Errorf("inclusion of %d: %v", seq, err)
		}
		if err := tlog.CheckRecord(hashes(ip.Proof), size, root, seq-1, tlog.RecordHash(append(ip.Payload, ' '))); err == nil {
			t.Errorf("inclusion of %d: an altered payload verified", seq)
		}
	}
	code, body := get(t, fmt.Sprintf("%s/compliance/v1/tlog/consistency?old_size=5&new_size=%d", p.URL, size), auditor, "")
	var cp struct {
		Proof []string `json:"proof"`
	}
	if code != 200 || json.Unmarshal(body, &cp) != nil {
		t.Fatalf("consistency: got %d %s", code, body)
	}
	rootAt5 := func() tlog.Hash { // what the outsider kept from an earlier visit: recomputed here from the leaves
		var leaves []tlog.Hash
		for seq := 1; seq <= 5; seq++ {
			_, b := get(t, fmt.Sprintf("%s/compliance/v1/tlog/inclusion?seq=%d&tree_size=5", p.URL, seq), auditor, "")
			var ip struct {
				Payload json.RawMessage `json:"payload"`
			}
			_ = json.Unmarshal(b, &ip)
			leaves = append(leaves, tlog.RecordHash(ip.Payload))
		}
		var stored []tlog.Hash
		r := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(ix))
			for i, x := range ix {
				out[i] = stored[x]
			}
			return out, nil
		})
		for i, leaf := range leaves {
			hs, _ := tlog.StoredHashesForRecordHash(int64(i), leaf, r)
			stored = append(stored, hs...)
		}
		h, _ := tlog.TreeHash(5, r)
		return h
	}()
	if err := tlog.CheckTree(hashes(cp.Proof), size, root, 5, rootAt5); err != nil {
		t.Errorf("consistency 5 → %d: %v", size, err)
	}

	// JSON form of the checkpoint carries the same note.
	code, body = get(t, p.URL+"/compliance/v1/tlog/checkpoint", auditor, "application/json")
	var cj struct {
		Checkpoint string `json:"checkpoint"`
		Size       int64  `json:"size"`
	}
	if code != 200 || json.Unmarshal(body, &cj) != nil || cj.Checkpoint != string(msg) || cj.Size != size {
		t.Errorf("checkpoint JSON: got %d %s", code, body)
	}
}

// Bad sizes are typed 400s; the global log is the operator's and auditors'
// (compliance:read + admin); a tenant's compliance:read token is refused it.
func TestTlogHTTPErrorsAndScopes(t *testing.T) {
	p, _ := tlogPlatform(t)
	auditor := p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	tenant := p.Token(t, "alpha", tenancy.ScopeComplianceRead)
	tests := []struct {
		path  string
		token string
		want  int
	}{
		{"/compliance/v1/tlog/checkpoint", tenant, 403},
		{"/compliance/v1/tlog/inclusion?seq=1&tree_size=3", tenant, 403},
		{"/compliance/v1/tlog/consistency?old_size=1&new_size=3", tenant, 403},
		{"/compliance/v1/tlog/checkpoint", "", 401},
		{"/compliance/v1/tlog/inclusion?seq=0&tree_size=3", auditor, 400},
		{"/compliance/v1/tlog/inclusion?seq=4&tree_size=3", auditor, 400},
		{"/compliance/v1/tlog/inclusion?seq=1&tree_size=999", auditor, 400},
		{"/compliance/v1/tlog/inclusion?seq=01&tree_size=3", auditor, 400},
		{"/compliance/v1/tlog/inclusion?seq=1", auditor, 400},
		{"/compliance/v1/tlog/consistency?old_size=4&new_size=3", auditor, 400},
		{"/compliance/v1/tlog/consistency?old_size=-1&new_size=3", auditor, 400},
		{"/compliance/v1/tlog/tenant/checkpoint?tenant=bravo", tenant, 403},
		{"/compliance/v1/tlog/tenant/inclusion?seq=1&tree_size=1&tenant=bravo", tenant, 403},
		{"/compliance/v1/tlog/tenant/inclusion?seq=99&tree_size=99", tenant, 400},
		{"/compliance/v1/tlog/tenant/consistency?old_size=1&new_size=99", tenant, 400},
		{"/compliance/v1/tlog/tenant/checkpoint?tenant=bravo", auditor, 200},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			code, body := get(t, p.URL+tc.path, tc.token, "")
			if code != tc.want {
				t.Fatalf("got %d %s, want %d", code, body, tc.want)
			}
			if code >= 400 {
				var eb struct {
					Error struct{ Message string } `json:"error"`
				}
				if json.Unmarshal(body, &eb) != nil || eb.Error.Message == "" {
					t.Errorf("error body %s: want a typed public message", body)
				}
			}
		})
	}
}

// A tenant gets inclusion proofs of its own entries in its own log:
// positions 1..n (never the global seq, which would count the other
// tenant's traffic between two of its entries), its own payloads only,
// and a tenant checkpoint that the published key verifies.
func TestTenantProofsOverHTTP(t *testing.T) {
	p, alphaSeqs := tlogPlatform(t)
	published, _ := p.Ledger.TreeVerifierKey()
	tenant := p.Token(t, "alpha", tenancy.ScopeComplianceRead)
	code, cp := get(t, p.URL+"/compliance/v1/tlog/tenant/checkpoint", tenant, "")
	if code != 200 {
		t.Fatalf("tenant checkpoint: got %d %s", code, cp)
	}
	h, err := audit.OpenTenantHead(cp, published, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if h.Size != uint64(len(alphaSeqs)) {
		t.Fatalf("tenant log size %d, want %d", h.Size, len(alphaSeqs))
	}
	if alphaSeqs[len(alphaSeqs)-1] == h.Size {
		t.Fatal("fixture: alpha's positions are its global seqs; the check below would prove nothing")
	}
	// The tenant's ledger view (/compliance/v1/ledger) numbers its rows as
	// the tenant log's positions.
	code, rows := get(t, p.URL+"/compliance/v1/ledger", tenant, "")
	if code != 200 {
		t.Fatalf("ledger: %d %s", code, rows)
	}
	view := map[uint64]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(rows)), "\n") {
		var row struct {
			Seq     uint64          `json:"seq"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		view[row.Seq] = string(row.Payload)
	}
	if uint64(len(view)) != h.Size {
		t.Fatalf("ledger view: %d rows, tenant log %d", len(view), h.Size)
	}
	for pos := uint64(1); pos <= h.Size; pos++ {
		code, body := get(t, fmt.Sprintf("%s/compliance/v1/tlog/tenant/inclusion?seq=%d&tree_size=%d", p.URL, pos, h.Size), tenant, "")
		if code != 200 {
			t.Fatalf("position %d: got %d %s", pos, code, body)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Fatal(err)
		}
		if len(raw) != 4 || string(raw["seq"]) != strconv.FormatUint(pos, 10) || string(raw["tree_size"]) != strconv.FormatUint(h.Size, 10) {
			t.Fatalf("position %d (global seq %d): got fields %s, want exactly seq=%d, tree_size, payload, proof", pos, alphaSeqs[pos-1], body, pos)
		}
		var ip struct {
			Payload json.RawMessage `json:"payload"`
			Proof   []string        `json:"proof"`
		}
		_ = json.Unmarshal(body, &ip)
		if view[pos] != string(ip.Payload) {
			t.Errorf("position %d: the ledger view shows another entry than the tenant log", pos)
		}
		env, err := audit.DecodeEnvelope(ip.Payload)
		if err != nil || env.Tenant != "alpha" {
			t.Fatalf("position %d: an entry of %q reached alpha", pos, env.Tenant)
		}
		proof := make([]tlog.Hash, len(ip.Proof))
		for i, s := range ip.Proof {
			b, _ := base64.StdEncoding.DecodeString(s)
			copy(proof[i][:], b)
		}
		if _, err := audit.VerifyTenantInclusion(cp, published, "alpha", pos, ip.Payload, proof); err != nil {
			t.Errorf("position %d: %v", pos, err)
		}
	}
}

// The same log over gRPC: public key, scopes, typed errors, tenant proofs.
func TestTlogGRPC(t *testing.T) {
	p, alphaSeqs := tlogPlatform(t)
	conn, ctx := p.GRPC(t)
	c := tlogv1.NewTransparencyLogServiceClient(conn)
	as := func(scopes ...tenancy.Scope) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token(t, "alpha", scopes...))
	}
	auditor, tenant := as(tenancy.ScopeComplianceRead, tenancy.ScopeAdmin), as(tenancy.ScopeComplianceRead)
	published, _ := p.Ledger.TreeVerifierKey()
	if k, err := c.GetVerifierKey(ctx, &tlogv1.GetVerifierKeyRequest{}); err != nil || k.GetKey() != published {
		t.Fatalf("verifier key without a token: got %v (%v)", k, err)
	}
	cp, err := c.GetCheckpoint(auditor, &tlogv1.GetCheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := audit.OpenTreeHead(cp.GetNote(), published)
	if err != nil || h.Size != cp.GetSize() {
		t.Fatalf("checkpoint: %v %v", h, err)
	}
	ip, err := c.GetInclusionProof(auditor, &tlogv1.GetInclusionProofRequest{Seq: 3, TreeSize: h.Size})
	if err != nil {
		t.Fatal(err)
	}
	proof := make([]tlog.Hash, len(ip.GetProof()))
	for i, b := range ip.GetProof() {
		copy(proof[i][:], b)
	}
	if _, err := audit.VerifyInclusion(cp.GetNote(), published, audit.Record{Seq: 3, Payload: ip.GetPayload()}, proof); err != nil {
		t.Errorf("inclusion: %v", err)
	}
	tcp, err := c.GetTenantCheckpoint(tenant, &tlogv1.GetTenantCheckpointRequest{})
	if err != nil || tcp.GetSize() != uint64(len(alphaSeqs)) {
		t.Fatalf("tenant checkpoint: %v (%v)", tcp, err)
	}
	tip, err := c.GetTenantInclusionProof(tenant, &tlogv1.GetInclusionProofRequest{Seq: 2, TreeSize: tcp.GetSize()})
	if err != nil || tip.GetSeq() != 2 {
		t.Fatalf("tenant inclusion: %v (%v)", tip, err)
	}
	tproof := make([]tlog.Hash, len(tip.GetProof()))
	for i, b := range tip.GetProof() {
		copy(tproof[i][:], b)
	}
	if _, err := audit.VerifyTenantInclusion(tcp.GetNote(), published, "alpha", 2, tip.GetPayload(), tproof); err != nil {
		t.Errorf("tenant inclusion: %v", err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"global checkpoint for a tenant token", func() error { _, err := c.GetCheckpoint(tenant, &tlogv1.GetCheckpointRequest{}); return err }, codes.PermissionDenied},
		{"another tenant's log", func() error {
			_, err := c.GetTenantCheckpoint(tenant, &tlogv1.GetTenantCheckpointRequest{Tenant: "bravo"})
			return err
		}, codes.PermissionDenied},
		{"seq 0", func() error {
			_, err := c.GetInclusionProof(auditor, &tlogv1.GetInclusionProofRequest{Seq: 0, TreeSize: 3})
			return err
		}, codes.InvalidArgument},
		{"size beyond the tree", func() error {
			_, err := c.GetConsistencyProof(auditor, &tlogv1.GetConsistencyProofRequest{OldSize: 1, NewSize: 10_000})
			return err
		}, codes.InvalidArgument},
		{"position beyond the tenant log", func() error {
			_, err := c.GetTenantInclusionProof(tenant, &tlogv1.GetInclusionProofRequest{Seq: 99, TreeSize: 99})
			return err
		}, codes.InvalidArgument},
	} {
		if err := tc.call(); status.Code(err) != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}
