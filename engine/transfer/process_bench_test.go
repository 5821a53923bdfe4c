package transfer

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// helperEnv names the directory holding the receiver process's TLS material
// and cluster key; TestHelperReceiverProcess runs only when it is set.
const helperEnv = "CLOISON_TRANSFER_RECEIVER_DIR"

// helperPrefix marks the helper's protocol lines on its stdout (the testing
// package writes there too).
const helperPrefix = "cloison-receiver "

// helperOp is a request to the receiver process, one JSON line on its stdin.
type helperOp struct {
	Op      string            `json:"op"` // "expect" or "wait"
	Tenant  cloison.TenantID  `json:"tenant,omitempty"`
	Request cloison.RequestID `json:"request,omitempty"`
	Tokens  int               `json:"tokens,omitempty"`
}

// helperReply is its answer: the address once at start, a Target for expect,
// the receiver's Result for wait.
type helperReply struct {
	Addr   string  `json:"addr,omitempty"`
	Target *Target `json:"target,omitempty"`
	Result *Result `json:"result,omitempty"`
	Err    string  `json:"err,omitempty"`
}

// TestHelperReceiverProcess is the decode node of
// BenchmarkTransferCrossProcess in its own OS process: a pool and arena of
// benchLayout, a Receiver served over gRPC with mutual TLS on loopback, and
// a line protocol on stdin/stdout through which the benchmark reserves
// (expect) and collects each transfer's Result (wait) — the verification
// times the receipt does not carry. It skips itself unless the benchmark
// started it.
func TestHelperReceiverProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("the receiver process of BenchmarkTransferCrossProcess; runs only when the benchmark starts it")
	}
	if err := runReceiverProcess(t, dir, os.Stdin, os.Stdout); err != nil {
		t.Fatal(err)
	}
}

func runReceiverProcess(t *testing.T, dir string, in io.Reader, out io.Writer) error {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	caPEM, err := read("ca.pem")
	if err != nil {
		return err
	}
	certPEM, err := read("decode.pem")
	if err != nil {
		return err
	}
	keyPEM, err := read("decode-key.pem")
	if err != nil {
		return err
	}
	secretHex, err := read("cluster.key")
	if err != nil {
		return err
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(secretHex)))
	if err != nil {
		return err
	}
	keys, err := NewKeyRing(Key{ID: "bench", Secret: secret})
	if err != nil {
		return err
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(caPEM) {
		return errors.New("ca.pem: no certificate")
	}
	cert, err := pki.LoadPEM(certPEM, keyPEM)
	if err != nil {
		return err
	}
	be, err := cpu.New(kernels.Options{})
	if err != nil {
		return err
	}
	defer be.Close()
	decode := newNode(t, be, benchLayout, "a")
	r, err := NewReceiver(ReceiverConfig{Pool: decode.pool, Arena: decode.arena, Keys: keys})
	if err != nil {
		return err
	}
	s := grpc.NewServer(ServerOptions(pki.ServerConfig(cert, ca))...)
	Register(s, r)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go s.Serve(ln)
	defer s.Stop()

	enc := json.NewEncoder(out)
	reply := func(rep helperReply) error {
		if _, err := io.WriteString(out, helperPrefix); err != nil {
			return err
		}
		return enc.Encode(rep)
	}
	if err := reply(helperReply{Addr: ln.Addr().String()}); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	var tk *Ticket
	for sc.Scan() { // until the benchmark closes stdin
		var op helperOp
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return fmt.Errorf("op %q: %w", sc.Text(), err)
		}
		var rep helperReply
		switch op.Op {
		case "expect":
			lease, err := decode.pool.Allocate(op.Tenant, op.Request, op.Tokens)
			if err == nil {
				tk, err = r.Expect(lease, op.Tokens)
			}
			if err != nil {
				rep.Err = err.Error()
				break
			}
			target := tk.Target()
			rep.Target = &target
		case "wait":
			if tk == nil {
				rep.Err = "wait without expect"
				break
			}
			res, err := tk.Wait(context.Background())
			if err != nil {
				rep.Err = err.Error()
			}
			rep.Result = &res
			// The reservation served its purpose: release and scrub, as
			// the engine would after decoding.
			_ = decode.pool.Release(tk.lease)
			if work := decode.pool.ScrubWork(); len(work) > 0 {
				_ = decode.arena.ZeroPages(work)
				_ = decode.pool.ConfirmScrub(work)
			}
			tk = nil
		default:
			rep.Err = "unknown op " + op.Op
		}
		if err := reply(rep); err != nil {
			return err
		}
	}
	return sc.Err()
}

// receiverProcess is the benchmark's handle on the helper process.
type receiverProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
	addr  string
}

func (p *receiverProcess) call(op helperOp) (helperReply, error) {
	b, _ := json.Marshal(op)
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return helperReply{}, err
	}
	return p.next()
}

func (p *receiverProcess) next() (helperReply, error) {
	for p.lines.Scan() {
		line, ok := strings.CutPrefix(p.lines.Text(), helperPrefix)
		if !ok {
			continue // the testing package's own output
		}
		var rep helperReply
		if err := json.Unmarshal([]byte(line), &rep); err != nil {
			return rep, err
		}
		if rep.Err != "" {
			return rep, errors.New("receiver process: " + rep.Err)
		}
		return rep, nil
	}
	return helperReply{}, fmt.Errorf("receiver process ended: %v", p.lines.Err())
}

// startReceiverProcess re-executes the test binary as the receiver, with the
// decode node's certificate from ca and the cluster key's secret.
func startReceiverProcess(b *testing.B, ca *pki.CA, secret []byte) *receiverProcess {
	b.Helper()
	dir := b.TempDir()
	cert, err := ca.Issue("decode-0", "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	certPEM, keyPEM, err := pki.EncodePEM(cert)
	if err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string][]byte{"ca.pem": ca.CertPEM(), "decode.pem": certPEM, "decode-key.pem": keyPEM,
		"cluster.key": []byte(hex.EncodeToString(secret) + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReceiverProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &receiverProcess{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	b.Cleanup(func() {
		stdin.Close() // the helper returns at EOF
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("receiver process: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			b.Error("receiver process did not exit")
		}
	})
	rep, err := p.next()
	if err != nil {
		b.Fatal(err)
	}
	p.addr = rep.Addr
	return p
}

// BenchmarkTransferCrossProcess moves leases of 1, 16 and 64 MiB of KV
// (benchLayout: pages of 1 MiB) from this process to a decode node in
// another OS process (TestHelperReceiverProcess), over gRPC with mutual TLS
// on loopback: the wire path of a real deployment, syscalls and TLS records
// included, without the in-process shortcuts. Reported per size: the send's
// throughput (MB/s from SetBytes, and GB/s), the receiver's throughput
// header to commit (recv-GB/s), and the verification share on the receiver
// as in BenchmarkTransfer: verify-cpu-% (hashing, digests and MACs, mostly
// beside the receiving loop) and verify-wait-% (the time verification added
// to the transfer).
func BenchmarkTransferCrossProcess(b *testing.B) {
	be, err := cpu.New(kernels.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ca, err := pki.NewCA("cloison-bench")
	if err != nil {
		b.Fatal(err)
	}
	keys, key := keyRing(b, "bench")
	// The receiver names the key "bench" too: same id, same secret.
	recv := startReceiverProcess(b, ca, key.Secret)
	cert, err := ca.Issue("prefill-0", "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	conn, err := grpc.NewClient(recv.addr, DialOptions(pki.ClientConfig(cert, ca.Pool(), "127.0.0.1"))...)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	d := GRPC(conn)

	prefill := newNode(b, be, benchLayout, "a")
	from := filledLease(b, be, prefill, benchLayout.Pages*benchLayout.PageTokens)
	s, err := NewSender(SenderConfig{Pool: prefill.pool, Arena: prefill.arena, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	pageBytes := LayoutOf(benchLayout).PageBytes()
	for _, mib := range []int{1, 16, 64} {
		tokens := mib << 20 / pageBytes * benchLayout.PageTokens
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			size := int64(tokens / benchLayout.PageTokens * pageBytes)
			b.SetBytes(size)
			var sent, verify, wait, elapsed time.Duration
			var n int64
			for b.Loop() {
				b.StopTimer()
				rep, err := recv.call(helperOp{Op: "expect", Tenant: from.Tenant, Request: from.Request, Tokens: tokens})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if _, err := s.Send(context.Background(), d, from, *rep.Target); err != nil {
					b.Fatal(err)
				}
				sent += time.Since(start)
				b.StopTimer()
				if rep, err = recv.call(helperOp{Op: "wait"}); err != nil {
					b.Fatal(err)
				}
				verify += rep.Result.Verify
				wait += rep.Result.VerifyWait
				elapsed += rep.Result.Elapsed
				n++
				b.StartTimer()
			}
			b.ReportMetric(float64(n*size)/sent.Seconds()/1e9, "GB/s")
			b.ReportMetric(float64(n*size)/elapsed.Seconds()/1e9, "recv-GB/s")
			b.ReportMetric(100*float64(verify)/float64(elapsed), "verify-cpu-%")
			b.ReportMetric(100*float64(wait)/float64(elapsed), "verify-wait-%")
		})
	}
}
