package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// Model is one further model a Server serves beside its own (Config's
// Engine, ModelName, Tokenizer): its own engine, hence its own KV pool,
// arena and capacity attestation. A request names it in its model field;
// everything else — authentication, policy, limits, the ledger, the stream
// caps, the admin and compliance APIs — is the server's, shared by all its
// models.
type Model struct {
	Name      string
	Engine    Engine
	Tokenizer *tokenizer.Tokenizer
	Chat      *chat.Template   // optional: the tokenizer's template
	Digest    audit.Digest     // SHA-256 of the model file, in every request.completed
	Adapters  *engine.Adapters // optional: its tenants' LoRA adapters
}

// Errors of AddModel and RemoveModel.
var (
	// ErrModelServed: a model of that name is already served.
	ErrModelServed = cloison.NewError(cloison.CodeConflict, "a model of that name is already served")
	// ErrModelPrimary: the model the node was started with cannot be
	// unloaded (everything not tied to a request runs on it).
	ErrModelPrimary = cloison.NewError(cloison.CodeInvalid, "the node's first model cannot be unloaded")
)

// modelSet is the further models a server serves; every view of the
// server shares it.
type modelSet struct {
	mu    sync.RWMutex
	views map[string]*Server // by model name, guarded by mu
}

// AddModel serves m beside the server's own models from now on. The
// caller built m's engine (and runs it) and recorded its attestation.
//
// Errors: ErrModelServed (the name is taken), an incomplete m.
func (s *Server) AddModel(m Model) error {
	if m.Name == "" || m.Engine == nil || m.Tokenizer == nil {
		return errors.New("api: incomplete model")
	}
	sm, err := service.NewModel(m.Name, m.Tokenizer, m.Chat)
	if err != nil {
		return err
	}
	s.modelSet.mu.Lock()
	defer s.modelSet.mu.Unlock()
	if _, ok := s.modelSet.views[m.Name]; ok || m.Name == s.root().cfg.ModelName {
		return ErrModelServed.Withf("%q", truncate(m.Name, maxFieldName))
	}
	v := *s.root()
	v.cfg.Engine, v.cfg.ModelName, v.cfg.Tokenizer, v.cfg.Chat, v.cfg.ModelDigest = m.Engine, m.Name, m.Tokenizer, sm.Chat, m.Digest
	v.req = s.root().req.For(service.ServedModel{Engine: m.Engine, Name: m.Name, Digest: m.Digest, Model: sm, Adapters: m.Adapters})
	v.primary = s.root()
	s.modelSet.views[m.Name] = &v
	v.metrics.serveModel(&v) // its pool, load and attestation under its model_name
	return nil
}

// RemoveModel stops serving the model named name: requests that name it
// from now on get ErrUnknownModel; those already running finish on its
// engine, which the caller stops. It returns the engine.
//
// Errors: ErrModelPrimary, ErrUnknownModel.
func (s *Server) RemoveModel(name string) (Engine, error) {
	if name == s.root().cfg.ModelName {
		return nil, ErrModelPrimary
	}
	s.modelSet.mu.Lock()
	defer s.modelSet.mu.Unlock()
	v, ok := s.modelSet.views[name]
	if !ok {
		return nil, ErrUnknownModel.Withf("%q", truncate(name, maxFieldName))
	}
	delete(s.modelSet.views, name)
	v.metrics.unserveModel(name)
	return v.cfg.Engine, nil
}

// Models names every model the server serves: its own first, then the
// further ones in name order.
func (s *Server) Models() []string {
	out := []string{s.root().cfg.ModelName}
	s.modelSet.mu.RLock()
	defer s.modelSet.mu.RUnlock()
	for name := range s.modelSet.views {
		out = append(out, name)
	}
	slices.Sort(out[1:])
	return out
}

// root is the server the views were made from (itself if it is one).
func (s *Server) root() *Server {
	if s.primary != nil {
		return s.primary
	}
	return s
}

// view is the server as it serves model name: the view of a further model,
// else the server itself, which refuses a model it does not serve
// (ErrUnknownModel) as it always did.
func (s *Server) view(name string) *Server {
	r := s.root()
	r.modelSet.mu.RLock()
	defer r.modelSet.mu.RUnlock()
	if v, ok := r.modelSet.views[name]; ok {
		return v
	}
	// "<model>:<adapter>": the view of the longest served model name
	// before a ':' (a model id may hold ':' itself).
	for i := strings.LastIndex(name, service.AdapterSep); i > 0; i = strings.LastIndex(name[:i], service.AdapterSep) {
		if v, ok := r.modelSet.views[name[:i]]; ok {
			return v
		}
	}
	return r
}

// views is every model's server, the server's own first.
func (s *Server) views() []*Server {
	r := s.root()
	out := []*Server{r}
	for _, name := range r.Models()[1:] {
		if v := r.view(name); v != r {
			out = append(out, v)
		}
	}
	return out
}

// byModel routes a request whose JSON body names a model to that model's
// view of the server. The body is read once (bounded by MaxBody: a larger
// one goes to the server's own model, whose decoder refuses it) and handed
// on unchanged. With a single model served nothing is read here.
func (s *Server) byModel(h func(*Server, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.modelSet.mu.RLock()
		several := len(s.modelSet.views) > 0
		s.modelSet.mu.RUnlock()
		if !several || r.Body == nil {
			h(s, w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		if err != nil {
			h(s, w, r)
			return
		}
		var named struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &named) // a malformed body is the decoder's to refuse
		h(s.view(named.Model), w, r)
	}
}

// modelEntry is one model of GET /v1/models as tenant p sees it.
func (s *Server) modelEntry(p tenancy.Principal) map[string]any {
	return map[string]any{"id": s.cfg.ModelName, "object": "model", "owned_by": "cloison", "context_length": s.contextFor(p)}
}

// ModelAdmin loads and unloads a node's further models at run time
// (*node.Node). Each call is an admin action: ledgered (model.loaded,
// model.unloaded, signed) before the change serves, refused when the ledger
// cannot record it.
type ModelAdmin interface {
	// LoadModel loads the GGUF at req.Path (relative to the node's model
	// directory) as model req.ID ("" : its name, ModelID), attests its
	// pool and serves it. Errors: ErrModelServed; a path outside the
	// model directory, a file that does not load (invalid); the memory
	// budget (*MemoryBudgetError, invalid); attest.ErrFailed; the ledger's.
	LoadModel(ctx context.Context, actor audit.Name, req ModelLoad) (ModelInfo, error)
	// UnloadModel stops serving model id. Errors: ErrModelPrimary,
	// ErrUnknownModel, the ledger's.
	UnloadModel(ctx context.Context, actor audit.Name, id string) (ModelInfo, error)
	// ServedModels are the models served now, the node's first one first.
	ServedModels() []ModelInfo
}

// ModelLoad is the body of POST /admin/v1/models.
type ModelLoad struct {
	// Path names the GGUF file, relative to the node's model directory
	// (--model-dir); ID is the model id requests name ("" : ModelID's).
	Path string `json:"path"`
	ID   string `json:"id,omitempty"`
}

// ModelInfo is one served model as the admin API shows it.
type ModelInfo struct {
	ID     string `json:"id"`
	Digest string `json:"digest"` // hex SHA-256 of the GGUF file
	// Bytes is what the node's memory budget counts for it: its weights
	// and its KV arena.
	Bytes         int64 `json:"bytes"`
	ServedContext int   `json:"served_context"`
	PoolPages     int   `json:"pool_pages"`
}

// MemoryBudgetError refuses a load that does not fit the node's memory
// budget (--model-memory-budget), with the figures: the model is never
// loaded in part, nor another one swapped out to make room.
type MemoryBudgetError struct {
	Model               string
	Need, InUse, Budget int64
}

func (e *MemoryBudgetError) Error() string {
	return fmt.Sprintf("model %q needs %d bytes (weights and KV arena); %d of the node's budget of %d are in use, %d free",
		e.Model, e.Need, e.InUse, e.Budget, max(e.Budget-e.InUse, 0))
}

// ErrorCode makes the refusal an invalid request (HTTP 400, gRPC
// InvalidArgument) whose public message carries the figures.
func (e *MemoryBudgetError) ErrorCode() cloison.Code { return cloison.CodeInvalid }

// PublicMessage is Error: the figures are the admin's to see.
func (e *MemoryBudgetError) PublicMessage() string { return e.Error() }

// adminModels serves the model routes of the admin API (adminRoutes).
func (s *Server) adminModelRoutes(mux *http.ServeMux, a func(http.HandlerFunc) http.Handler) {
	mux.Handle("GET /admin/v1/models", a(s.listServedModels))
	mux.Handle("POST /admin/v1/models", a(s.loadModel))
	mux.Handle("DELETE /admin/v1/models/{id...}", a(s.unloadModel))
}

// errNoModelAdmin: the server was built without ModelAdmin.
var errNoModelAdmin = cloison.NewError(cloison.CodeNotFound, "this node does not load models at run time")

func (s *Server) listServedModels(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ModelAdmin == nil {
		WriteHTTPError(w, errNoModelAdmin)
		return
	}
	writeJSON(w, 200, map[string]any{"models": s.cfg.ModelAdmin.ServedModels()})
}

func (s *Server) loadModel(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ModelAdmin == nil {
		WriteHTTPError(w, errNoModelAdmin)
		return
	}
	var req ModelLoad
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &req); err != nil {
		WriteHTTPError(w, err)
		return
	}
	info, err := s.cfg.ModelAdmin.LoadModel(r.Context(), s.actor(r), req)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, info)
}

func (s *Server) unloadModel(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ModelAdmin == nil {
		WriteHTTPError(w, errNoModelAdmin)
		return
	}
	info, err := s.cfg.ModelAdmin.UnloadModel(r.Context(), s.actor(r), r.PathValue("id"))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, info)
}

// RecordModelIncident records an incident model's engine reported
// (RecordIncident, under the model's name).
func (s *Server) RecordModelIncident(model string, in engine.Incident) {
	s.view(model).RecordIncident(in)
}

func servedModelPB(m ModelInfo) *adminv1.ServedModel {
	return &adminv1.ServedModel{Id: m.ID, Digest: m.Digest, Bytes: m.Bytes, ServedContext: int64(m.ServedContext), PoolPages: int64(m.PoolPages)}
}

// ListModels is GET /admin/v1/models over gRPC.
func (a *adminService) ListModels(context.Context, *adminv1.ListServedModelsRequest) (*adminv1.ListServedModelsResponse, error) {
	if a.s.cfg.ModelAdmin == nil {
		return nil, errNoModelAdmin
	}
	out := &adminv1.ListServedModelsResponse{}
	for _, m := range a.s.cfg.ModelAdmin.ServedModels() {
		out.Models = append(out.Models, servedModelPB(m))
	}
	return out, nil
}

// LoadModel is POST /admin/v1/models over gRPC.
func (a *adminService) LoadModel(ctx context.Context, req *adminv1.LoadModelRequest) (*adminv1.ServedModel, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	if a.s.cfg.ModelAdmin == nil {
		return nil, errNoModelAdmin
	}
	m, err := a.s.cfg.ModelAdmin.LoadModel(ctx, grpcActor(ctx), ModelLoad{Path: req.GetPath(), ID: req.GetId()})
	if err != nil {
		return nil, err
	}
	return servedModelPB(m), nil
}

// UnloadModel is DELETE /admin/v1/models/{id} over gRPC.
func (a *adminService) UnloadModel(ctx context.Context, req *adminv1.UnloadModelRequest) (*adminv1.ServedModel, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	if a.s.cfg.ModelAdmin == nil {
		return nil, errNoModelAdmin
	}
	m, err := a.s.cfg.ModelAdmin.UnloadModel(ctx, grpcActor(ctx), req.GetId())
	if err != nil {
		return nil, err
	}
	return servedModelPB(m), nil
}
