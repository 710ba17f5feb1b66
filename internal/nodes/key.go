package nodes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/sshkey"
)

// Key is vastfleet's own key pair, generated once in the data dir, and
// the host keys it has learned per instance.
type Key struct {
	Signer ssh.Signer
	// Path is the private key file, for OpenSSH's -i.
	Path string
	// Authorized is the public key as one authorized_keys line.
	Authorized string
	// KnownHosts holds the host key each instance showed first, under
	// HostKeyAlias(id).
	KnownHosts string
	mu         sync.Mutex
}

// LoadKey reads the fleet key in sshDir, creating it the first time.
func LoadKey(sshDir string) (*Key, error) {
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(sshDir, "id_ed25519")
	signer, err := sshkey.LoadOrCreate(path, "vastfleet")
	if err != nil {
		return nil, fmt.Errorf("fleet key: %w", err)
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " vastfleet"
	if err := atomicfile.WriteFile(path+".pub", []byte(pub+"\n"), 0o600); err != nil {
		return nil, err
	}
	return &Key{Signer: signer, Path: path, Authorized: pub, KnownHosts: filepath.Join(sshDir, "known_hosts")}, nil
}

// HostKeyAlias names an instance's host key in known_hosts and in the
// exported ssh config.
func HostKeyAlias(id int64) string { return "vastfleet-" + strconv.FormatInt(id, 10) }

// HostKeys reads the known_hosts file: the key each instance showed first.
func (k *Key) HostKeys() (map[string]ssh.PublicKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := map[string]ssh.PublicKey{}
	b, err := os.ReadFile(k.KnownHosts)
	if errors.Is(err, os.ErrNotExist) {
		return keys, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		alias, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rest)); err == nil {
			keys[alias] = pk
		}
	}
	return keys, nil
}

// Remember appends an instance's first host key (accept-new), in OpenSSH's
// known_hosts format so exported ssh configs verify the same key.
func (k *Key) Remember(id int64, key ssh.PublicKey) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	fh, err := os.OpenFile(k.KnownHosts, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(fh, "%s %s", HostKeyAlias(id), ssh.MarshalAuthorizedKey(key))
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}
