package transfer

import (
	"context"

	"github.com/cloison/cloison"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/kernels"
)

// Stream is the sender's end of one transfer: frames in order, then the
// receipt. A gRPC Transfer_PushClient is one; so is the in-process pipe.
// Send may keep the frame's byte slices until the receiver is done with them:
// the sender never reuses a buffer it sent.
type Stream interface {
	Send(*transferv1.Frame) error
	CloseAndRecv() (*transferv1.Receipt, error)
}

// Dialer opens a Stream to a receiver. Cancelling ctx aborts the stream;
// CloseAndRecv then returns once the receiver has stopped (acknowledged).
type Dialer interface {
	Open(ctx context.Context) (Stream, error)
}

// FrameSource is the receiver's end: Recv returns io.EOF after the sender
// closed its side.
type FrameSource interface {
	Recv() (*transferv1.Frame, error)
}

func headerToWire(h *Header, mac [32]byte) *transferv1.Header {
	return &transferv1.Header{
		Version:       Version,
		KeyId:         h.KeyID,
		Tenant:        string(h.Tenant),
		Request:       string(h.Request),
		SenderEpoch:   h.SenderEpoch,
		ReceiverEpoch: h.ReceiverEpoch,
		Reservation:   h.Reservation[:],
		ModelDigest:   h.Model[:],
		Layout: &transferv1.Layout{
			Layers: uint32(h.Layout.Layers), KvHeads: uint32(h.Layout.KVHeads),
			HeadDim: uint32(h.Layout.HeadDim), PageTokens: uint32(h.Layout.PageTokens),
			KvType: transferv1.KVType(h.Layout.KV),
		},
		Tokens:    uint64(h.Tokens),
		Pages:     uint32(h.Pages),
		HeaderMac: mac[:],
	}
}

// headerFromWire decodes a header; malformed fields are a ReasonMalformed
// refusal (sizes are bounded so that no int overflows).
func headerFromWire(w *transferv1.Header) (Header, error) {
	l := w.GetLayout()
	if w.GetVersion() != Version {
		return Header{}, refuse(ReasonVersion, "manifest format %d, this node speaks %d", w.GetVersion(), Version)
	}
	// An unknown KV type decodes as itself (and is refused against the
	// arena's after authentication); only one that cannot be a
	// kernels.KVType is malformed.
	if len(w.GetReservation()) != 16 || len(w.GetModelDigest()) != 32 || len(w.GetHeaderMac()) != 32 || l == nil ||
		w.GetTokens() > 1<<40 || l.GetLayers() > 1<<16 || l.GetKvHeads() > 1<<16 || l.GetHeadDim() > 1<<16 || l.GetPageTokens() > 1<<16 ||
		l.GetKvType() < 0 || l.GetKvType() > 255 {
		return Header{}, refuse(ReasonMalformed, "header fields of the wrong size")
	}
	h := Header{
		KeyID:         w.GetKeyId(),
		Tenant:        cloison.TenantID(w.GetTenant()),
		Request:       cloison.RequestID(w.GetRequest()),
		SenderEpoch:   w.GetSenderEpoch(),
		ReceiverEpoch: w.GetReceiverEpoch(),
		Layout: Layout{Layers: int(l.GetLayers()), KVHeads: int(l.GetKvHeads()),
			HeadDim: int(l.GetHeadDim()), PageTokens: int(l.GetPageTokens()), KV: kernels.KVType(l.GetKvType())},
		Tokens: int(w.GetTokens()),
		Pages:  int(w.GetPages()),
	}
	copy(h.Reservation[:], w.GetReservation())
	copy(h.Model[:], w.GetModelDigest())
	return h, nil
}
