// Package sshkey keeps an ed25519 SSH private key in a file: the fleet's
// own key and the simulator's host key. A new key is written crash-safely
// (internal/atomicfile: temp file, fsync, rename, fsync of the directory),
// so a power cut leaves either no key or the whole key, never an empty
// file that every later command would fail to parse.
package sshkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
)

// LoadOrCreate reads the private key at path, or, when there is none,
// generates an ed25519 key with comment and writes it there, mode 0600.
// A key that exists is made 0600 (one written by hand may be wider).
func LoadOrCreate(path, comment string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return create(path, comment)
	}
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("ssh key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("ssh key %s: %w (move it away and a new one is generated)", path, err)
	}
	return signer, nil
}

func create(path, comment string) (ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("ssh key: %w", err)
	}
	return ssh.NewSignerFromKey(priv)
}
