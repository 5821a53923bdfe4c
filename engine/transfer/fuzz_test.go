package transfer

import (
	"context"
	"errors"
	"io"
	"testing"

	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"google.golang.org/protobuf/proto"
)

// recorder is a Dialer whose streams keep the frames a sender sends and
// deliver none.
type recorder struct{ frames []*transferv1.Frame }

func (r *recorder) Open(context.Context) (Stream, error) { return r, nil }
func (r *recorder) Send(f *transferv1.Frame) error {
	r.frames = append(r.frames, proto.Clone(f).(*transferv1.Frame))
	return nil
}
func (r *recorder) CloseAndRecv() (*transferv1.Receipt, error) { return nil, io.ErrUnexpectedEOF }

type frames struct {
	fs []*transferv1.Frame
	i  int
}

func (s *frames) Recv() (*transferv1.Frame, error) {
	if s.i == len(s.fs) {
		return nil, io.EOF
	}
	s.i++
	return s.fs[s.i-1], nil
}

// mutate applies edits drawn from data to a transcript: flip a byte of a
// chunk, of a digest, of a header field or a MAC, drop, duplicate or swap
// frames, truncate.
func mutate(fs []*transferv1.Frame, data []byte) []*transferv1.Frame {
	out := make([]*transferv1.Frame, len(fs))
	for i, f := range fs {
		out[i] = proto.Clone(f).(*transferv1.Frame)
	}
	for len(data) >= 3 && len(out) > 0 {
		op, i, x := data[0]%8, int(data[1])%len(out), data[2]
		data = data[3:]
		f := out[i]
		switch op {
		case 0:
			if c := f.GetChunk(); c != nil {
				c.Data[int(x)%len(c.Data)] ^= 1 << (x % 8)
			}
		case 1:
			if c := f.GetChunk(); c != nil && len(c.Digest) > 0 {
				c.Digest[int(x)%32] ^= 1
			}
			if tr := f.GetTrailer(); tr != nil {
				tr.PageDigests[int(x)%len(tr.PageDigests)][0] ^= 1
			}
		case 2:
			if h := f.GetHeader(); h != nil {
				switch x % 6 {
				case 0:
					h.Tokens++
				case 1:
					h.Pages--
				case 2:
					h.SenderEpoch++
				case 3:
					h.Request += "x"
				case 4:
					h.HeaderMac[0] ^= 1
				case 5:
					h.Reservation[0] ^= 1
				}
			}
			if tr := f.GetTrailer(); tr != nil {
				tr.ManifestMac[x%32] ^= 1
			}
		case 3:
			out = append(out[:i], out[i+1:]...)
		case 4:
			out = append(out[:i+1], out[i:]...)
		case 5:
			if i+1 < len(out) {
				out[i], out[i+1] = out[i+1], out[i]
			}
		case 6:
			out = out[:i]
		case 7:
			if c := f.GetChunk(); c != nil && x%2 == 0 {
				c.Offset++
			} else if c != nil {
				c.Page++
			}
		}
	}
	return out
}

func sameFrames(a, b []*transferv1.Frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// FuzzReceive feeds mutated transcripts of a real transfer to a receiver:
// a transcript that differs from the sender's in any way is refused with a
// typed error, its reservation discarded; only the untouched one commits;
// the pool's books stay consistent either way.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 2, 7})
	f.Add([]byte{3, 4, 0})
	f.Add([]byte{4, 1, 0, 5, 6, 0})
	f.Add([]byte{2, 0, 0})
	f.Add([]byte{6, 9, 0})
	be, err := cpu.New(kernels.Options{Threads: 1})
	if err != nil {
		f.Fatal(err)
	}
	defer be.Close()
	ac := kernels.ArenaConfig{Pages: 8, PageTokens: 4, Layers: 2, KVHeads: 1, HeadDim: 4} // 128-byte pages
	keys, _ := keyRing(f, "k1")
	prefill := newNode(f, be, ac, "a")
	decode := newNode(f, be, ac, "a")
	const tokens = 10 // 3 pages, the last partial
	from := filledLease(f, be, prefill, tokens)
	s, _ := NewSender(SenderConfig{Pool: prefill.pool, Arena: prefill.arena, Keys: keys, ChunkBytes: 50})
	r, _ := NewReceiver(ReceiverConfig{Pool: decode.pool, Arena: decode.arena, Keys: keys, VerifyWorkers: 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		dl, err := decode.pool.Allocate("a", "prefill", tokens)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := r.Expect(dl, tokens)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		s.Send(context.Background(), rec, from, tk.Target())
		fs := mutate(rec.frames, data)
		_, serr := r.Serve(context.Background(), &frames{fs: fs})
		// A transcript whose header names no pending reservation leaves
		// it waiting: end it as a decode timeout would. A no-op otherwise.
		tk.Cancel()
		_, werr := tk.Wait(context.Background())
		if sameFrames(fs, rec.frames) {
			if serr != nil || werr != nil {
				t.Fatalf("untouched transcript refused: %v / %v", serr, werr)
			}
			if n, _ := decode.pool.Written(dl); n != tokens {
				t.Fatalf("got %d written, want %d", n, tokens)
			}
			decode.pool.Release(dl)
		} else {
			if serr == nil || werr == nil {
				t.Fatalf("mutated transcript accepted: %v / %v", serr, werr)
			}
			var v *VerificationError
			if !errors.As(werr, &v) && !errors.As(serr, &v) {
				t.Fatalf("got %v / %v, want a *VerificationError", serr, werr)
			}
			if _, err := decode.pool.Written(dl); !errors.Is(err, isolation.ErrStaleLease) {
				t.Fatalf("refused transfer: got %v, want the reservation discarded", err)
			}
		}
		decode.scrub(t)
		decode.check(t)
		if st := decode.pool.Stats(); st.Leased != 0 || st.Draining != 0 {
			t.Fatalf("decode pool after the transfer: %+v", st)
		}
	})
}
