package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	responsev1 "github.com/cloison/cloison/api/proto/cloison/response/v1"
	tlogv1 "github.com/cloison/cloison/api/proto/cloison/tlog/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/tenancy"
)

// Metadata keys of the gRPC API.
const (
	// RequestIDKey carries the server's request id out (header metadata;
	// a unary call refused before its message is read has it in its
	// status instead, as google.rpc.RequestInfo).
	// An incoming value is the client's correlation id: logged beside the
	// server's, never used as the ledger's request id (ledger ids are
	// server-chosen, so that no client can collide with another's).
	RequestIDKey = "x-request-id"
	// DecisionIDKey carries Generate's policy decision id (header metadata).
	DecisionIDKey = "x-cloison-decision-id"
	// ReceiptKey carries Generate's receipt (trailer metadata, on success
	// only): request.completed's audit.Receipt, the ReceiptHeader value.
	ReceiptKey = "cloison-receipt"
	// RetryAfterKey carries seconds to wait (trailer metadata) on
	// RESOURCE_EXHAUSTED from a quota and on UNAVAILABLE, as the
	// google.rpc.RetryInfo detail of the status does.
	RetryAfterKey = "retry-after"
)

// MethodScopes are the scopes each gRPC method requires; an empty list
// means any valid token. A method missing here (and not public) is refused
// with PERMISSION_DENIED: deny on doubt. The HTTP routes require the same
// scopes (Handler, adminRoutes, complianceRoutes).
var MethodScopes = map[string][]tenancy.Scope{
	inferencev1.InferenceService_Generate_FullMethodName:       {tenancy.ScopeInfer},
	inferencev1.InferenceService_Tokenize_FullMethodName:       {tenancy.ScopeInfer},
	inferencev1.InferenceService_Embed_FullMethodName:          {tenancy.ScopeInfer},
	inferencev1.InferenceService_Rerank_FullMethodName:         {tenancy.ScopeInfer},
	inferencev1.InferenceService_Score_FullMethodName:          {tenancy.ScopeInfer},
	inferencev1.InferenceService_ListModels_FullMethodName:     {tenancy.ScopeInfer},
	inferencev1.InferenceService_GetAttestation_FullMethodName: {},

	adminv1.AdminService_ListTenants_FullMethodName:          {tenancy.ScopeAdmin},
	adminv1.AdminService_GetTenant_FullMethodName:            {tenancy.ScopeAdmin},
	adminv1.AdminService_CreateTenant_FullMethodName:         {tenancy.ScopeAdmin},
	adminv1.AdminService_SuspendTenant_FullMethodName:        {tenancy.ScopeAdmin},
	adminv1.AdminService_ActivateTenant_FullMethodName:       {tenancy.ScopeAdmin},
	adminv1.AdminService_ListKeys_FullMethodName:             {tenancy.ScopeAdmin},
	adminv1.AdminService_RotateKeys_FullMethodName:           {tenancy.ScopeAdmin},
	adminv1.AdminService_PoolStatus_FullMethodName:           {tenancy.ScopeAdmin},
	adminv1.AdminService_ReloadPolicies_FullMethodName:       {tenancy.ScopeAdmin},
	adminv1.AdminService_ReloadPoliciesStream_FullMethodName: {tenancy.ScopeAdmin},
	adminv1.AdminService_UpdateTenant_FullMethodName:         {tenancy.ScopeAdmin},
	adminv1.AdminService_ListClients_FullMethodName:          {tenancy.ScopeAdmin},
	adminv1.AdminService_CreateClient_FullMethodName:         {tenancy.ScopeAdmin},
	adminv1.AdminService_RevokeClient_FullMethodName:         {tenancy.ScopeAdmin},
	adminv1.AdminService_RevokeToken_FullMethodName:          {tenancy.ScopeAdmin},
	adminv1.AdminService_RetireKey_FullMethodName:            {tenancy.ScopeAdmin},
	adminv1.AdminService_ListModels_FullMethodName:           {tenancy.ScopeAdmin},
	adminv1.AdminService_LoadModel_FullMethodName:            {tenancy.ScopeAdmin},
	adminv1.AdminService_UnloadModel_FullMethodName:          {tenancy.ScopeAdmin},
	adminv1.AdminService_RegisterAdapter_FullMethodName:      {tenancy.ScopeAdmin},
	adminv1.AdminService_UnregisterAdapter_FullMethodName:    {tenancy.ScopeAdmin},
	adminv1.AdminService_ListAdapters_FullMethodName:         {tenancy.ScopeAdmin},

	compliancev1.ComplianceService_ListIncidents_FullMethodName:  {tenancy.ScopeComplianceRead},
	compliancev1.ComplianceService_GetIncident_FullMethodName:    {tenancy.ScopeComplianceRead},
	compliancev1.ComplianceService_LedgerRange_FullMethodName:    {tenancy.ScopeComplianceRead},
	compliancev1.ComplianceService_OpenIncident_FullMethodName:   {tenancy.ScopeComplianceWrite, tenancy.ScopeAdmin},
	compliancev1.ComplianceService_UpdateIncident_FullMethodName: {tenancy.ScopeComplianceWrite, tenancy.ScopeAdmin},
	compliancev1.ComplianceService_AddNotice_FullMethodName:      {tenancy.ScopeComplianceWrite, tenancy.ScopeAdmin},
	compliancev1.ComplianceService_VerifyLedger_FullMethodName:   {tenancy.ScopeComplianceRead, tenancy.ScopeAdmin},
	compliancev1.ComplianceService_Export_FullMethodName:         {tenancy.ScopeComplianceRead, tenancy.ScopeAdmin},
}

// publicServices need no token: health reveals readiness only, reflection
// the service descriptors (as /healthz and /readyz over HTTP).
var publicServices = []string{"/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"}

func isPublic(method string) bool {
	for _, p := range publicServices {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// ErrNoScopeRule: a gRPC method with no entry in MethodScopes.
var ErrNoScopeRule = cloison.NewError(cloison.CodePermissionDenied, "no scope rule for this method")

// Authenticate verifies a bearer token; *tenancy.Verifier's Verify is one.
type Authenticate func(ctx context.Context, token string) (tenancy.Principal, error)

type grpcPrincipalKey struct{}
type grpcRequestIDKey struct{}

// grpcPrincipal returns the principal the interceptors authenticated.
func grpcPrincipal(ctx context.Context) tenancy.Principal {
	p, _ := ctx.Value(grpcPrincipalKey{}).(tenancy.Principal)
	return p
}

// grpcRequestID returns the request id the interceptors assigned (a fresh
// one outside them).
func grpcRequestID(ctx context.Context) cloison.RequestID {
	if id, ok := ctx.Value(grpcRequestIDKey{}).(cloison.RequestID); ok {
		return id
	}
	return NewRequestID()
}

// Interceptors returns the unary and stream server interceptors, in this
// order for every call: a request id (header metadata x-request-id); the
// bearer token in the `authorization` metadata verified by auth and the
// method's scopes (MethodScopes) required, except for health and
// reflection; the handler, with any error mapped by GRPCError (the one
// table) and, for quota errors, a retry-after trailer; a panic becomes
// INTERNAL without its text.
func Interceptors(auth Authenticate, log *slog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	if log == nil {
		log = slog.Default()
	}
	ic := &interceptor{auth: auth, log: log}
	return ic.unary, ic.stream
}

type interceptor struct {
	auth   Authenticate
	log    *slog.Logger
	refuse func(cloison.TenantID, audit.Name, error) error // counts a capacity refusal (nil: none)
	// unary are the methods whose request gRPC reads before any
	// interceptor runs (set once the services are registered): admit
	// authenticates those. A streaming handler reads its request inside
	// the interceptors, after begin, which answers with the request id
	// header.
	unaryMethods map[string]bool
}

// begin assigns the request id and authenticates; it returns the context
// the handler runs with.
func (ic *interceptor) begin(ctx context.Context, method string, setHeader func(metadata.MD) error) (context.Context, cloison.RequestID, error) {
	id := NewRequestID()
	ctx = context.WithValue(ctx, grpcRequestIDKey{}, id)
	traceRequestID(ctx, id)
	ctx, rec := withAccess(ctx)
	_ = setHeader(metadata.Pairs(RequestIDKey, string(id)))
	if isPublic(method) {
		return ctx, id, nil
	}
	p, err := ic.authorize(ctx, method)
	if p.Tenant != "" {
		rec.setTenant(p.Tenant)
	}
	if err != nil {
		return ctx, id, err
	}
	if err := bindConn(ctx, p.Tenant); err != nil {
		if ic.refuse != nil {
			err = ic.refuse(p.Tenant, stageCapacity, err)
		}
		return ctx, id, err
	}
	return context.WithValue(ctx, grpcPrincipalKey{}, p), id, nil
}

// authorize verifies the call's bearer token and the method's scopes. For
// a unary call admit has done so already, before the message was read;
// it is done again here, within the call's trace span (admit runs before
// the span exists), at the cost of one more signature check.
func (ic *interceptor) authorize(ctx context.Context, method string) (tenancy.Principal, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return ic.verify(ctx, method, md)
}

// verify authenticates md's bearer token and requires method's scopes; the
// principal is returned (for the access line) even when a scope is missing.
func (ic *interceptor) verify(ctx context.Context, method string, md metadata.MD) (tenancy.Principal, error) {
	scopes, ok := MethodScopes[method]
	raw := ""
	if v := md.Get("authorization"); len(v) == 1 {
		if scheme, tok, found := strings.Cut(v[0], " "); found && strings.EqualFold(scheme, "Bearer") {
			raw = strings.TrimSpace(tok)
		}
	}
	if raw == "" {
		return tenancy.Principal{}, ErrNoToken
	}
	p, err := ic.auth(ctx, raw)
	if err != nil {
		return tenancy.Principal{}, err
	}
	if !ok {
		return tenancy.Principal{}, ErrNoScopeRule.Withf("%s", method)
	}
	return p, p.Require(scopes...)
}

// admit runs when a call's headers arrive, before gRPC reads any byte of
// its message (grpc.InTapHandle): the caller of a unary method without a
// valid token and the method's scopes is refused there, so that no one
// unauthenticated makes the server buffer or decode a message (gRPC reads
// a unary request before the interceptors run; a streaming one only when
// the handler asks, after begin). The bearer check is a signature
// and a table lookup, cheap enough to run before admission.
func (ic *interceptor) admit(ctx context.Context, info *tap.Info) (context.Context, error) {
	if isPublic(info.FullMethodName) || !ic.unaryMethods[info.FullMethodName] {
		return ctx, nil
	}
	start := time.Now()
	p, err := ic.verify(ctx, info.FullMethodName, info.Header)
	if err == nil {
		return ctx, nil
	}
	// Refused before the stream exists: no header can carry the request
	// id, so the status carries it (google.rpc.RequestInfo), and the access
	// line and the cause are written here.
	id := NewRequestID()
	actx, rec := withAccess(ctx)
	if p.Tenant != "" {
		rec.setTenant(p.Tenant)
	}
	logCause(ic.log, id, err)
	st := GRPCStatus(err)
	if withID, derr := st.WithDetails(&errdetails.RequestInfo{RequestId: string(id)}); derr == nil {
		st = withID
	}
	clientID := ""
	if v := info.Header.Get(RequestIDKey); len(v) == 1 && len(v[0]) <= 128 {
		clientID = sanitizeName(v[0])
	}
	logGRPCAccess(ic.log, actx, info.FullMethodName, id, clientID, st.Code(), start)
	return ctx, st.Err()
}

// finish maps err to its status (with the retry hint also as a
// retry-after trailer), logs the cause with the request id, and logs the
// call (its access line, accesslog.go).
func (ic *interceptor) finish(ctx context.Context, method string, id cloison.RequestID, clientID string, start time.Time, err error, setTrailer func(metadata.MD)) error {
	if err != nil {
		if _, isStatus := err.(interface{ GRPCStatus() *status.Status }); !isStatus {
			code, _, _ := Describe(err)
			if d := retryAfter(err, code); d > 0 {
				setTrailer(metadata.Pairs(RetryAfterKey, strconv.Itoa(int(d/time.Second))))
			}
		}
		logCause(ic.log, id, err)
		err = GRPCStatus(err).Err()
	}
	logGRPCAccess(ic.log, ctx, method, id, clientID, status.Code(err), start)
	return err
}

// recovered turns a panic into INTERNAL without its text.
func (ic *interceptor) recovered(method string, v any) error {
	ic.log.Error("grpc handler panic", "method", method, "panic", fmt.Sprint(v))
	return GRPCStatus(errors.New("panic")).Err()
}

func clientRequestID(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(RequestIDKey)
	if len(v) != 1 || len(v[0]) > 128 {
		return ""
	}
	return sanitizeName(v[0])
}

func (ic *interceptor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	start, method := time.Now(), info.FullMethod
	clientID := clientRequestID(ctx)
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, ic.recovered(method, v)
		}
	}()
	ctx, id, err := ic.begin(ctx, method, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
	if err == nil {
		resp, err = h(ctx, req)
	}
	if err != nil {
		resp = nil
	}
	return resp, ic.finish(ctx, method, id, clientID, start, err, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
}

// serverStream carries the interceptors' context to a stream handler.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

func (ic *interceptor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	start, method := time.Now(), info.FullMethod
	clientID := clientRequestID(ss.Context())
	defer func() {
		if v := recover(); v != nil {
			err = ic.recovered(method, v)
		}
	}()
	ctx, id, err := ic.begin(ss.Context(), method, ss.SetHeader)
	if err == nil {
		err = h(srv, &serverStream{ServerStream: ss, ctx: ctx})
	}
	return ic.finish(ctx, method, id, clientID, start, err, ss.SetTrailer)
}

// sizeLimits holds every gRPC request message to Config.MaxBody, the
// size of an HTTP body. gRPC itself enforces it (MaxRecvMsgSize) on a
// message's length prefix, before any of its bytes are read, so that no
// caller, authenticated or not, makes the node read more per message than
// an HTTP body; the policy reload, whose HTTP route takes 8×, takes a
// larger bundle over several messages (ReloadPoliciesStream). gRPC answers
// a message over the limit RESOURCE_EXHAUSTED itself, unary or streaming,
// before any interceptor or handler could map it (its status names both
// sizes and nothing else). sizeLimits also refuses a
// message serverCodec could not decode (ErrMalformedMessage), and admin
// and compliance strings with control characters (ErrControlCharacters).
type sizeLimits struct {
	max int64
}

func (l sizeLimits) check(method string, m any) error {
	if malformed(m) {
		return ErrMalformedMessage
	}
	if err := plainRequest(method, m); err != nil {
		return err
	}
	lim := l.max
	if pm, ok := m.(proto.Message); ok && int64(proto.Size(pm)) > lim {
		return ErrBodyTooLarge.Withf("a message of more than %d bytes", lim)
	}
	return nil
}

func (l sizeLimits) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := l.check(info.FullMethod, req); err != nil {
		return nil, err // mapped by the outer interceptor
	}
	return h(ctx, req)
}

func (l sizeLimits) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &sizedStream{ServerStream: ss, l: l, method: info.FullMethod})
}

// sizedStream checks each message a stream handler receives.
type sizedStream struct {
	grpc.ServerStream
	l      sizeLimits
	method string
}

func (s *sizedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.l.check(s.method, m)
}

// readiness is the reason the node is not ready, or nil
// (service.Requests.Ready; /readyz and gRPC health): every served model's
// attestation passed and its engine runs (ModelReady), and the ledger
// answers.
func (s *Server) readiness(ctx context.Context) error {
	r := s.root()
	for _, v := range r.views()[1:] { // every further model served
		if err := v.req.ModelReady(); err != nil {
			return err
		}
	}
	return r.req.Ready(ctx) // the first model's, and the ledger
}

// healthServer answers grpc.health.v1 as /readyz answers: SERVING only when
// the attestation passed and the ledger answers. Check looks now; Watch
// follows a refresh every HealthInterval.
type healthServer struct {
	*health.Server
	s *Server
}

// HealthInterval is how often Watch streams re-check readiness.
var HealthInterval = 2 * time.Second

var grpcServices = []string{inferencev1.InferenceService_ServiceDesc.ServiceName, adminv1.AdminService_ServiceDesc.ServiceName,
	compliancev1.ComplianceService_ServiceDesc.ServiceName}

func (h *healthServer) refresh(ctx context.Context) {
	st := healthpb.HealthCheckResponse_SERVING
	if err := h.s.readiness(ctx); err != nil {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	h.SetServingStatus("", st)
	for _, name := range grpcServices {
		h.SetServingStatus(name, st)
	}
}

func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.refresh(ctx)
	return h.Server.Check(ctx, req)
}

// GRPCServer returns a gRPC server with the inference, admin and compliance
// services, health and reflection, behind Interceptors. Its health
// refresher runs until ctx ends (then it reports NOT_SERVING).
func (s *Server) GRPCServer(ctx context.Context, opts ...grpc.ServerOption) *grpc.Server {
	ic := &interceptor{auth: s.req.Authenticate, log: s.log, refuse: s.refuse}
	unary, stream := ic.unary, ic.stream
	lim := sizeLimits{max: s.cfg.MaxBody}
	// gRPC's own limit is MaxBody, checked against a message's length
	// prefix before its bytes are read; admit refuses every caller of a
	// unary method without a valid token and the method's scopes before
	// that (a streaming call's messages are read by its handler, after the
	// interceptors).
	// The tracing interceptors first: every other one runs within the
	// call's span, child of the caller's traceparent.
	opts = append(append(tracing.ServerOptions(s.cfg.Tracer), grpc.ChainUnaryInterceptor(unary, lim.unary), grpc.ChainStreamInterceptor(stream, lim.stream),
		grpc.MaxRecvMsgSize(int(s.cfg.MaxBody)), grpc.InTapHandle(ic.admit), grpc.ForceServerCodec(serverCodec{})), opts...)
	gs := grpc.NewServer(opts...)
	inferencev1.RegisterInferenceServiceServer(gs, &inferenceService{s: s})
	adminv1.RegisterAdminServiceServer(gs, &adminService{s: s})
	compliancev1.RegisterComplianceServiceServer(gs, &complianceService{s: s})
	tlogv1.RegisterTransparencyLogServiceServer(gs, &tlogService{s: s})
	responsev1.RegisterResponseServiceServer(gs, &responseService{s: s})
	ic.unaryMethods = map[string]bool{}
	for svc, info := range gs.GetServiceInfo() {
		for _, m := range info.Methods {
			if !m.IsClientStream && !m.IsServerStream {
				ic.unaryMethods["/"+svc+"/"+m.Name] = true
			}
		}
	}
	hs := &healthServer{Server: health.NewServer(), s: s}
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	hs.refresh(ctx)
	go func() {
		t := time.NewTicker(HealthInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				hs.Shutdown()
				return
			case <-t.C:
				hs.refresh(ctx)
			}
		}
	}()
	return gs
}
