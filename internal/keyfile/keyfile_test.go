package keyfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Secret files that group or others may access are refused, whichever
// secret they hold: a key readable by another account is no longer a
// secret, so starting with it would hide the exposure.
func TestReadSecretModes(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "checkpoint.key")
	if _, err := Write(key); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode os.FileMode
		want error
	}{
		{0o600, nil},
		{0o400, nil},
		{0o640, ErrInsecureMode},
		{0o604, ErrInsecureMode},
		{0o644, ErrInsecureMode},
		{0o620, ErrInsecureMode},
		{0o601, ErrInsecureMode},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			if err := os.Chmod(key, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := Private(key)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Private: got %v, want %v", err, tt.want)
			}
			_, err = ReadSecret(key)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("ReadSecret: got %v, want %v", err, tt.want)
			}
		})
	}
	// A symbolic link (as Kubernetes mounts Secrets) is judged by its target.
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(key, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Private(link); err != nil {
		t.Fatalf("link to a 0600 key: got %v, want nil", err)
	}
	if _, err := ReadSecret(dir); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("a directory: got %v, want ErrNotRegular", err)
	}
	// The public half is not a secret.
	if _, err := ReadPublic(key+".pub", 32); err != nil {
		t.Fatalf("public key (0644): got %v, want nil", err)
	}
}
