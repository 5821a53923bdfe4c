package main

import (
	"path/filepath"
	"testing"
	"time"
)

// A certificate of the wrong role for this node does not start it. (That a
// decode node's transfer server serves no stream before its API server
// exists is node's TestDecodeServesTransfersOnlyOnceStarted.)
func TestDecodeRefusesWrongRoleCertificate(t *testing.T) {
	c := newCluster(t, "prefill-1", "decode")
	cfg := config{stateDir: t.TempDir(), roles: roleConfig{role: roleDecode, tlsCA: c.ca, tlsCert: filepath.Join(c.dir, "decode.pem"),
		tlsKey: filepath.Join(c.dir, "decode-key.pem"), clusterKey: c.clusterKey, transferAddr: "127.0.0.1:0", prefillPeers: "127.0.0.1:1", prefillTimeout: time.Minute}}
	wrong := cfg
	wrong.roles.tlsCert, wrong.roles.tlsKey = filepath.Join(c.dir, "prefill-1.pem"), filepath.Join(c.dir, "prefill-1-key.pem")
	if _, err := wrong.decodeSpec(); err == nil {
		t.Fatal("got a decode node started with a prefill certificate, want it refused")
	}
	d, err := cfg.decodeSpec()
	if err != nil {
		t.Fatal(err)
	}
	d.Listener.Close()
}
