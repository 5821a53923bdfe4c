// Package rpcerr is the one encoding of cloison errors on the wire: the
// table of every code's gRPC code, HTTP status and OpenAI error type
// (wire.go, which api serves from), and the gRPC statuses built from it,
// shared by the servers that write them (api, engine/transfer,
// engine/transfer/prefillrpc) and the peers that read them (prefillrpc,
// engine/transfer, tests). It depends on nothing above the root package,
// so a prefill node answers with the public API's statuses without
// linking the API.
//
// Guarantees:
//   - A status written by New carries the cloison code as a
//     google.rpc.ErrorInfo detail (Reason = the code, Domain = Domain) and a
//     retry hint, when there is one, as a google.rpc.RetryInfo detail. Its
//     message is the public message only: callers pass nothing private.
//   - Code reads the code back only from such a detail, never from the
//     message text: a status without one (a transport failure, a peer that
//     is not Cloison) has no cloison code, and the caller decides what that
//     means (Code reports false).
package rpcerr

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cloison/cloison"
)

// Domain is the ErrorInfo domain of every cloison code.
const Domain = "cloison.dev"

// New returns a status of grpc code c whose message is msg (public text
// only) and whose details carry code and, when retry is positive, the
// retry hint rounded up to whole seconds.
func New(c codes.Code, code cloison.Code, msg string, retry time.Duration) *status.Status {
	st := status.New(c, msg)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: string(code), Domain: Domain}}
	if retry > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(RoundUp(retry))})
	}
	with, err := st.WithDetails(details...)
	if err != nil {
		return st // only for an OK code, which carries no error
	}
	return with
}

// RoundUp rounds d up to whole seconds, at least one: what Retry-After can
// say.
func RoundUp(d time.Duration) time.Duration {
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// Code returns the cloison code of a status error written by New; false
// when err is not a status or has no ErrorInfo of Domain naming a known
// code.
func Code(err error) (cloison.Code, bool) {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return "", false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != Domain {
			continue
		}
		for _, c := range cloison.Codes {
			if string(c) == info.GetReason() {
				return c, true
			}
		}
	}
	return "", false
}

// RetryDelay returns the RetryInfo delay of a status error; zero if none.
func RetryDelay(err error) time.Duration {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return 0
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}
