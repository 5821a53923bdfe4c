package api

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cloison/cloison"
)

// ErrMalformedMessage: a gRPC request message that is not valid protobuf
// for its method, or holds a string that is not UTF-8.
var ErrMalformedMessage = cloison.NewError(cloison.CodeInvalid, "the request message is not valid protobuf for this method (or a string in it is not UTF-8)")

// serverCodec is protobuf, except for a request message that does not
// decode: gRPC would answer that INTERNAL with the library's text, before
// any interceptor runs. Instead the message is left empty and marked
// (malformedMark, an unknown field), and sizeLimits answers it
// ErrMalformedMessage (INVALID_ARGUMENT with the ErrorInfo every error
// carries), after authentication.
type serverCodec struct{}

func (serverCodec) Name() string { return "proto" }

func (serverCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("api: marshal %T: not a protobuf message", v)
	}
	return proto.Marshal(m)
}

func (serverCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("api: unmarshal into %T: not a protobuf message", v)
	}
	if err := proto.Unmarshal(data, m); err != nil {
		proto.Reset(m)
		m.ProtoReflect().SetUnknown(malformedMark)
	}
	return nil
}

// malformedMark is the unknown field serverCodec leaves in a message that
// did not decode: the highest field number, which no message of the API
// uses. A client that sends it itself is refused as malformed.
var malformedMark = protowire.AppendBytes(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), []byte("cloison: malformed"))

func malformed(m any) bool {
	pm, ok := m.(proto.Message)
	return ok && bytes.Contains(pm.ProtoReflect().GetUnknown(), malformedMark)
}
