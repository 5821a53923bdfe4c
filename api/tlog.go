package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	tlogv1 "github.com/cloison/cloison/api/proto/cloison/tlog/v1"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// The ledger's transparency log (audit/doc.go, "Merkle tree" and "Tenant
// logs"): its signed checkpoints and RFC 6962 proofs, over HTTP (tlogRoutes)
// and gRPC (tlogService), one implementation behind both: the operations
// of service.Compliance (proofs.go there).
//
// Who may see what:
//   - the verifier key is public: it checks signatures, nothing more;
//   - the global log's proofs here (inclusion by ledger seq with the
//     entry's payload, consistency) and its checkpoint with cosignatures
//     need compliance:read and admin: a payload names its tenant. Its
//     size, hashes and latest checkpoint are public at /log/
//     (servedlog.go), where tenants' entries are leaf hashes only;
//   - a tenant log needs compliance:read and is the caller's own tenant's:
//     positions among its own leaves (audit.TenantLeaf: its requests, its
//     incidents and notices, redacted where they name other tenants),
//     proofs whose every hash comes from those leaves. Naming another tenant
//     (?tenant=, the tenant field) is for admin only and refused otherwise.

// ErrOtherTenantLog: a caller without admin named a tenant log other than
// its own.
var ErrOtherTenantLog = service.ErrOtherTenantLog

// tlogRoutes.
//
//	GET /compliance/v1/tlog/key                                  public — note verifier key (text/plain)
//	GET /compliance/v1/tlog/checkpoint                           compliance:read + admin — latest signed note (text/plain; JSON if Accept asks)
//	GET /compliance/v1/tlog/inclusion?seq=N&tree_size=M          compliance:read + admin
//	GET /compliance/v1/tlog/consistency?old_size=A&new_size=B    compliance:read + admin
//	GET /compliance/v1/tlog/tenant/checkpoint[?tenant=T]         compliance:read — the caller's tenant log, signed now
//	GET /compliance/v1/tlog/tenant/inclusion?seq=N&tree_size=M   compliance:read — N: position among the tenant's entries
//	GET /compliance/v1/tlog/tenant/consistency?old_size=A&new_size=B
//
// Proofs are JSON: {"seq","tree_size","payload" (the leaf's canonical
// JSON, verbatim: the entry's, or in a tenant log its audit.TenantView
// when it names other tenants), "proof": [base64 hashes]} and {"old_size","new_size",
// "proof"}. A size or position that is missing, not a canonical positive
// decimal, or beyond the log is 400; an empty log 404.
func (s *Server) tlogRoutes(mux *http.ServeMux) {
	global := func(h http.HandlerFunc) http.Handler {
		return s.auth(h, tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	}
	own := func(h http.HandlerFunc) http.Handler { return s.auth(h, tenancy.ScopeComplianceRead) }
	mux.HandleFunc("GET /compliance/v1/tlog/key", s.tlogKey)
	mux.Handle("GET /compliance/v1/tlog/checkpoint", global(func(w http.ResponseWriter, r *http.Request) {
		var msg []byte
		k, err := witnessesParam(r)
		switch {
		case err != nil:
		case k > 0:
			// The latest checkpoint cosigned by at least k witnesses,
			// cosignature lines appended (audit.VerifyCosigned checks them).
			msg, err = s.ops.compliance.CosignedCheckpoint(r.Context(), k)
		default:
			msg, err = s.ops.compliance.Checkpoint(r.Context())
		}
		s.writeNote(w, r, msg, err, "")
	}))
	mux.Handle("GET /compliance/v1/tlog/inclusion", global(func(w http.ResponseWriter, r *http.Request) {
		s.httpInclusion(w, r, "")
	}))
	mux.Handle("GET /compliance/v1/tlog/consistency", global(func(w http.ResponseWriter, r *http.Request) {
		s.httpConsistency(w, r, "")
	}))
	mux.Handle("GET /compliance/v1/tlog/tenant/checkpoint", own(func(w http.ResponseWriter, r *http.Request) {
		t, err := tenantLogOf(principal(r), r.URL.Query().Get("tenant"))
		var msg []byte
		if err == nil {
			msg, err = s.ops.compliance.TenantCheckpoint(r.Context(), t)
		}
		s.writeNote(w, r, msg, err, t)
	}))
	mux.Handle("GET /compliance/v1/tlog/tenant/inclusion", own(func(w http.ResponseWriter, r *http.Request) {
		t, err := tenantLogOf(principal(r), r.URL.Query().Get("tenant"))
		if err != nil {
			WriteHTTPError(w, err)
			return
		}
		s.httpInclusion(w, r, t)
	}))
	mux.Handle("GET /compliance/v1/tlog/tenant/consistency", own(func(w http.ResponseWriter, r *http.Request) {
		t, err := tenantLogOf(principal(r), r.URL.Query().Get("tenant"))
		if err != nil {
			WriteHTTPError(w, err)
			return
		}
		s.httpConsistency(w, r, t)
	}))
}

// tenantLogOf returns the tenant whose log p asks for: its own, or (admin
// only) the one it names (service.TenantLogOf).
func tenantLogOf(p tenancy.Principal, named string) (cloison.TenantID, error) {
	return service.TenantLogOf(p, named)
}

func (s *Server) tlogKey(w http.ResponseWriter, _ *http.Request) {
	k, err := s.ops.compliance.VerifierKey()
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(k + "\n"))
}

// checkpointJSON is a signed note with its parsed fields; a verifier checks
// the note itself, never trusts the fields.
type checkpointJSON struct {
	Checkpoint string `json:"checkpoint"`
	Origin     string `json:"origin"`
	Size       uint64 `json:"size"`
	Root       string `json:"root"`
}

// writeNote answers with the signed note msg (text/plain), or as
// checkpointJSON when the client accepts application/json.
func (s *Server) writeNote(w http.ResponseWriter, r *http.Request, msg []byte, err error, t cloison.TenantID) {
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		h, err := s.ops.compliance.ParseCheckpoint(msg, t)
		if err != nil {
			WriteHTTPError(w, err)
			return
		}
		writeJSON(w, 200, checkpointJSON{Checkpoint: string(msg), Origin: string(h.Origin), Size: h.Size,
			Root: base64.StdEncoding.EncodeToString(h.Root[:])})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(msg)
}

// witnessesParam parses the optional witnesses=K (1..64) of a checkpoint
// request; 0 when absent.
func witnessesParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("witnesses")
	if v == "" {
		return 0, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 || k > 64 || strconv.Itoa(k) != v {
		return 0, ErrBadField.Withf("witnesses must be an integer from 1 to 64")
	}
	return k, nil
}

// sizeParam parses a required canonical positive decimal.
func sizeParam(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != v {
		return 0, ErrBadField.Withf("%s must be a positive integer", name)
	}
	return n, nil
}

type inclusionJSON struct {
	Seq      uint64          `json:"seq"`
	TreeSize uint64          `json:"tree_size"`
	Payload  json.RawMessage `json:"payload"`
	Proof    []string        `json:"proof"`
}

type consistencyJSON struct {
	OldSize uint64   `json:"old_size"`
	NewSize uint64   `json:"new_size"`
	Proof   []string `json:"proof"`
}

func hashBytes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = append([]byte(nil), h[:]...)
	}
	return out
}

func (s *Server) httpInclusion(w http.ResponseWriter, r *http.Request, t cloison.TenantID) {
	seq, err := sizeParam(r, "seq")
	var size uint64
	if err == nil {
		size, err = sizeParam(r, "tree_size")
	}
	var payload []byte
	var proof tlog.RecordProof
	if err == nil {
		payload, proof, err = s.ops.compliance.Inclusion(r.Context(), t, seq, size)
	}
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, inclusionJSON{Seq: seq, TreeSize: size, Payload: payload, Proof: service.HashesBase64(proof)})
}

func (s *Server) httpConsistency(w http.ResponseWriter, r *http.Request, t cloison.TenantID) {
	old, err := sizeParam(r, "old_size")
	var size uint64
	if err == nil {
		size, err = sizeParam(r, "new_size")
	}
	var proof tlog.TreeProof
	if err == nil {
		proof, err = s.ops.compliance.Consistency(r.Context(), t, old, size)
	}
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, consistencyJSON{OldSize: old, NewSize: size, Proof: service.HashesBase64(proof)})
}

// tlogService is TransparencyLogService over the same calls.
type tlogService struct {
	tlogv1.UnimplementedTransparencyLogServiceServer
	s *Server
}

// tlogMethodScopes join MethodScopes (init): the same scopes as the HTTP
// routes. GetVerifierKey is public (tlogPublic).
var tlogMethodScopes = map[string][]tenancy.Scope{
	tlogv1.TransparencyLogService_GetCheckpoint_FullMethodName:             {tenancy.ScopeComplianceRead, tenancy.ScopeAdmin},
	tlogv1.TransparencyLogService_GetInclusionProof_FullMethodName:         {tenancy.ScopeComplianceRead, tenancy.ScopeAdmin},
	tlogv1.TransparencyLogService_GetConsistencyProof_FullMethodName:       {tenancy.ScopeComplianceRead, tenancy.ScopeAdmin},
	tlogv1.TransparencyLogService_GetTenantCheckpoint_FullMethodName:       {tenancy.ScopeComplianceRead},
	tlogv1.TransparencyLogService_GetTenantInclusionProof_FullMethodName:   {tenancy.ScopeComplianceRead},
	tlogv1.TransparencyLogService_GetTenantConsistencyProof_FullMethodName: {tenancy.ScopeComplianceRead},
}

func init() {
	for m, sc := range tlogMethodScopes {
		MethodScopes[m] = sc
	}
	publicServices = append(publicServices, tlogv1.TransparencyLogService_GetVerifierKey_FullMethodName)
	grpcServices = append(grpcServices, tlogv1.TransparencyLogService_ServiceDesc.ServiceName)
}

func (g *tlogService) GetVerifierKey(context.Context, *tlogv1.GetVerifierKeyRequest) (*tlogv1.VerifierKey, error) {
	k, err := g.s.ops.compliance.VerifierKey()
	if err != nil {
		return nil, err
	}
	return &tlogv1.VerifierKey{Key: k}, nil
}

func (g *tlogService) notePB(msg []byte, t cloison.TenantID) (*tlogv1.Checkpoint, error) {
	h, err := g.s.ops.compliance.ParseCheckpoint(msg, t)
	if err != nil {
		return nil, err
	}
	return &tlogv1.Checkpoint{Note: msg, Origin: string(h.Origin), Size: h.Size, Root: h.Root[:]}, nil
}

func (g *tlogService) GetCheckpoint(ctx context.Context, _ *tlogv1.GetCheckpointRequest) (*tlogv1.Checkpoint, error) {
	msg, err := g.s.ops.compliance.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	return g.notePB(msg, "")
}

func (g *tlogService) GetInclusionProof(ctx context.Context, req *tlogv1.GetInclusionProofRequest) (*tlogv1.InclusionProof, error) {
	if req.GetTenant() != "" {
		return nil, ErrBadField.Withf("tenant is for the tenant methods")
	}
	return g.inclusion(ctx, "", req)
}

func (g *tlogService) GetConsistencyProof(ctx context.Context, req *tlogv1.GetConsistencyProofRequest) (*tlogv1.ConsistencyProof, error) {
	if req.GetTenant() != "" {
		return nil, ErrBadField.Withf("tenant is for the tenant methods")
	}
	return g.consistency(ctx, "", req)
}

func (g *tlogService) GetTenantCheckpoint(ctx context.Context, req *tlogv1.GetTenantCheckpointRequest) (*tlogv1.Checkpoint, error) {
	t, err := tenantLogOf(grpcPrincipal(ctx), req.GetTenant())
	if err != nil {
		return nil, err
	}
	msg, err := g.s.ops.compliance.TenantCheckpoint(ctx, t)
	if err != nil {
		return nil, err
	}
	return g.notePB(msg, t)
}

func (g *tlogService) GetTenantInclusionProof(ctx context.Context, req *tlogv1.GetInclusionProofRequest) (*tlogv1.InclusionProof, error) {
	t, err := tenantLogOf(grpcPrincipal(ctx), req.GetTenant())
	if err != nil {
		return nil, err
	}
	return g.inclusion(ctx, t, req)
}

func (g *tlogService) GetTenantConsistencyProof(ctx context.Context, req *tlogv1.GetConsistencyProofRequest) (*tlogv1.ConsistencyProof, error) {
	t, err := tenantLogOf(grpcPrincipal(ctx), req.GetTenant())
	if err != nil {
		return nil, err
	}
	return g.consistency(ctx, t, req)
}

func (g *tlogService) inclusion(ctx context.Context, t cloison.TenantID, req *tlogv1.GetInclusionProofRequest) (*tlogv1.InclusionProof, error) {
	if req.GetSeq() == 0 || req.GetTreeSize() == 0 {
		return nil, ErrBadField.Withf("seq and tree_size must be positive integers")
	}
	payload, proof, err := g.s.ops.compliance.Inclusion(ctx, t, req.GetSeq(), req.GetTreeSize())
	if err != nil {
		return nil, err
	}
	return &tlogv1.InclusionProof{Seq: req.GetSeq(), TreeSize: req.GetTreeSize(), Payload: payload, Proof: hashBytes(proof)}, nil
}

func (g *tlogService) consistency(ctx context.Context, t cloison.TenantID, req *tlogv1.GetConsistencyProofRequest) (*tlogv1.ConsistencyProof, error) {
	if req.GetOldSize() == 0 || req.GetNewSize() == 0 {
		return nil, ErrBadField.Withf("old_size and new_size must be positive integers")
	}
	proof, err := g.s.ops.compliance.Consistency(ctx, t, req.GetOldSize(), req.GetNewSize())
	if err != nil {
		return nil, err
	}
	return &tlogv1.ConsistencyProof{OldSize: req.GetOldSize(), NewSize: req.GetNewSize(), Proof: hashBytes(proof)}, nil
}
