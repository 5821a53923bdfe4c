package api

import (
	"context"
	"io"
	"net/http"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// A tenant's LoRA adapter is requested as model "<model>:<adapter>"
// (service.AdapterSep): the request goes to the model's view (Server.view)
// and the service resolves the adapter for the caller's tenant only. GET
// /v1/models lists the caller's own adapters; another tenant's adapter and
// one that does not exist get the same 404 model_not_found.

// adapterEntry is one adapter of GET /v1/models as tenant p sees it.
func (s *Server) adapterEntry(p tenancy.Principal, id string) map[string]any {
	return map[string]any{"id": id, "object": "model", "owned_by": string(p.Tenant), "parent": s.cfg.ModelName, "context_length": s.contextFor(p)}
}

// ModelAdapters is the adapter registry of the served model named model
// (nil, false: no such model, or it has none).
func (s *Server) ModelAdapters(model string) (*engine.Adapters, bool) {
	v := s.view(model)
	if v.cfg.ModelName != model || v.req.Adapters() == nil {
		return nil, false
	}
	return v.req.Adapters(), true
}

// AdapterAdmin registers and unregisters tenants' LoRA adapters on a node
// at run time (*node.Node). Each call is an admin action: ledgered
// (adapter.registered, adapter.unregistered: signed, under the tenant)
// before the change serves, refused when the ledger cannot record it.
type AdapterAdmin interface {
	// RegisterAdapter loads the adapter file at req.Path (relative to the
	// node's model directory) for model req.Model ("": the node's first)
	// and registers it for req.Tenant as req.Name.
	RegisterAdapter(ctx context.Context, actor audit.Name, req AdapterRegister) (AdapterInfo, error)
	// UnregisterAdapter removes tenant's adapter name of model ("": the
	// node's first).
	UnregisterAdapter(ctx context.Context, actor audit.Name, tenant cloison.TenantID, model, name string) (AdapterInfo, error)
	// TenantAdapters are tenant's adapters, every model's.
	TenantAdapters(tenant cloison.TenantID) []AdapterInfo
	// UploadAdapter registers up.Data, a tenant's own adapter file, for
	// up.Tenant as up.Name of up.Model (POST /v1/adapters): its SHA-256
	// must be up.Digest, and it must load as an adapter of the model.
	UploadAdapter(ctx context.Context, actor audit.Name, up AdapterUpload) (AdapterInfo, error)
}

// AdapterUpload is a tenant's upload of its own adapter (POST /v1/adapters).
type AdapterUpload struct {
	Tenant cloison.TenantID
	Model  string // "": the node's first
	Name   string
	Digest string // hex SHA-256 the client states for Data
	Data   []byte
}

// DefaultMaxAdapterBytes is Config.MaxAdapterBytes' default.
const DefaultMaxAdapterBytes = 256 << 20

// uploadAdapter answers POST /v1/adapters?model=M&name=N&digest=HEX: the
// body is a GGUF LoRA adapter file (at most Config.MaxAdapterBytes), the
// caller's tenant's own, registered for it alone once adapter.registered is
// ledgered (actor: the tenant's subject). A model the tenant may not use is
// the same 404 model_not_found as everywhere.
func (s *Server) uploadAdapter(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AdapterAdmin == nil {
		WriteHTTPError(w, errNoAdapterAdmin)
		return
	}
	p := principal(r)
	q := r.URL.Query()
	for k := range q {
		if k != "model" && k != "name" && k != "digest" {
			WriteHTTPError(w, ErrBadField.Withf("unknown parameter %q", truncate(k, maxFieldName)))
			return
		}
	}
	model := q.Get("model")
	if model == "" {
		model = s.root().cfg.ModelName
	}
	if !p.TenantRecord.Allows(model) {
		WriteHTTPError(w, ErrUnknownModel.Withf("%q", truncate(model, maxFieldName)))
		return
	}
	if r.ContentLength > s.cfg.MaxAdapterBytes {
		WriteHTTPError(w, ErrBodyTooLarge)
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxAdapterBytes+1))
	if err != nil {
		WriteHTTPError(w, ErrBadField.Withf("the body could not be read"))
		return
	}
	if int64(len(data)) > s.cfg.MaxAdapterBytes {
		WriteHTTPError(w, ErrBodyTooLarge)
		return
	}
	info, err := s.cfg.AdapterAdmin.UploadAdapter(r.Context(), service.TenantActor(p),
		AdapterUpload{Tenant: p.Tenant, Model: model, Name: q.Get("name"), Digest: q.Get("digest"), Data: data})
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, info)
}

// deleteOwnAdapter answers DELETE /v1/adapters/{name}?model=M: the caller's
// tenant's own adapter of M ("": the node's first) stops serving once
// adapter.unregistered is ledgered (actor: the tenant's subject). Another
// tenant's adapter and none by that name are the same 404
// model_not_found.
func (s *Server) deleteOwnAdapter(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AdapterAdmin == nil {
		WriteHTTPError(w, errNoAdapterAdmin)
		return
	}
	p := principal(r)
	q := r.URL.Query()
	for k := range q {
		if k != "model" {
			WriteHTTPError(w, ErrBadField.Withf("unknown parameter %q", truncate(k, maxFieldName)))
			return
		}
	}
	model := q.Get("model")
	if model == "" {
		model = s.root().cfg.ModelName
	}
	name := r.PathValue("name")
	if !p.TenantRecord.Allows(model) {
		WriteHTTPError(w, ErrUnknownModel.Withf("%q", truncate(model+service.AdapterSep+name, maxFieldName)))
		return
	}
	info, err := s.cfg.AdapterAdmin.UnregisterAdapter(r.Context(), service.TenantActor(p), p.Tenant, model, name)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, info)
}

// AdapterRegister is the body of POST /admin/v1/adapters.
type AdapterRegister struct {
	Tenant cloison.TenantID `json:"tenant"`
	Name   string           `json:"name"`
	Path   string           `json:"path"`            // a GGUF LoRA adapter, relative to --model-dir
	Model  string           `json:"model,omitempty"` // the model it adapts ("": the node's first)
}

// AdapterInfo is one registered adapter as the admin API shows it: its
// tenant, the id requests name it by, and digests — never its weights.
type AdapterInfo struct {
	Tenant      cloison.TenantID `json:"tenant"`
	Name        string           `json:"name"`
	ID          string           `json:"id"` // "<model>:<name>", the model field of a request
	Model       string           `json:"model"`
	Digest      string           `json:"digest"`       // hex SHA-256 of the adapter file
	ModelDigest string           `json:"model_digest"` // hex SHA-256 of the model file it adapts
	Rank        int              `json:"rank"`
	Alpha       float32          `json:"alpha"`
}

// errNoAdapterAdmin: the server was built without AdapterAdmin.
var errNoAdapterAdmin = cloison.NewError(cloison.CodeNotFound, "this node registers no adapters at run time")

// adminAdapterRoutes serves the adapter routes of the admin API.
func (s *Server) adminAdapterRoutes(mux *http.ServeMux, a func(http.HandlerFunc) http.Handler) {
	mux.Handle("GET /admin/v1/tenants/{tenant}/adapters", a(s.listAdapters))
	mux.Handle("POST /admin/v1/adapters", a(s.registerAdapter))
	mux.Handle("DELETE /admin/v1/tenants/{tenant}/adapters/{name}", a(s.unregisterAdapter))
}

func (s *Server) listAdapters(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AdapterAdmin == nil {
		WriteHTTPError(w, errNoAdapterAdmin)
		return
	}
	out := s.cfg.AdapterAdmin.TenantAdapters(cloison.TenantID(r.PathValue("tenant")))
	if out == nil {
		out = []AdapterInfo{}
	}
	writeJSON(w, 200, map[string]any{"adapters": out})
}

func (s *Server) registerAdapter(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AdapterAdmin == nil {
		WriteHTTPError(w, errNoAdapterAdmin)
		return
	}
	var req AdapterRegister
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &req); err != nil {
		WriteHTTPError(w, err)
		return
	}
	info, err := s.cfg.AdapterAdmin.RegisterAdapter(r.Context(), s.actor(r), req)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, info)
}

func (s *Server) unregisterAdapter(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AdapterAdmin == nil {
		WriteHTTPError(w, errNoAdapterAdmin)
		return
	}
	info, err := s.cfg.AdapterAdmin.UnregisterAdapter(r.Context(), s.actor(r), cloison.TenantID(r.PathValue("tenant")),
		r.URL.Query().Get("model"), r.PathValue("name"))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, info)
}
