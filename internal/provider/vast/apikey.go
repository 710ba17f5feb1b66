package vast

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// ResolvedKey is the API key ResolveAPIKey found, where it came from (never
// the key itself) and what the user should hear about how it is kept.
type ResolvedKey struct {
	Key      string
	Source   string
	Warnings []string
}

// FlagKeyWarning is said whenever a key comes from --api-key.
const FlagKeyWarning = "--api-key shows the key to every user of this machine (process list) and in shell history; set VAST_API_KEY or run `vastai set api-key KEY` instead"

// maxKeyFile bounds what is read of a key file; a key is under 100 bytes.
const maxKeyFile = 64 << 10

// ResolveAPIKey finds the key in the CLI's order: the flag, VAST_API_KEY,
// then in configDir (default $XDG_CONFIG_HOME/vastai, else
// ~/.config/vastai) the 2FA session key vast_tfa_key before vast_api_key,
// and last the legacy ~/.vast_api_key. File contents are whitespace-
// stripped. A key from the flag, or from a file others may read, comes with
// a warning; a key file that is not a regular file (a FIFO, a device) is
// refused, without opening it. No key at all is an empty Key, nil error.
func ResolveAPIKey(flag string, getenv func(string) string, configDir string) (ResolvedKey, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if k := strings.TrimSpace(flag); k != "" {
		return ResolvedKey{Key: k, Source: "flag --api-key", Warnings: []string{FlagKeyWarning}}, nil
	}
	if k := strings.TrimSpace(getenv("VAST_API_KEY")); k != "" {
		return ResolvedKey{Key: k, Source: "environment VAST_API_KEY"}, nil
	}
	home := getenv("HOME")
	if configDir == "" {
		if x := getenv("XDG_CONFIG_HOME"); x != "" {
			configDir = filepath.Join(x, "vastai")
		} else if home != "" {
			configDir = filepath.Join(home, ".config", "vastai")
		}
	}
	var files []string
	if configDir != "" {
		files = append(files, filepath.Join(configDir, "vast_tfa_key"), filepath.Join(configDir, "vast_api_key"))
	}
	if home != "" {
		files = append(files, filepath.Join(home, ".vast_api_key"))
	}
	for _, f := range files {
		k, warn, err := readKeyFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return ResolvedKey{}, err
		}
		if k != "" {
			r := ResolvedKey{Key: k, Source: "file " + f}
			if warn != "" {
				r.Warnings = append(r.Warnings, warn)
			}
			return r, nil
		}
	}
	return ResolvedKey{}, nil
}

// readKeyFile reads a key file that must be a regular file (a symlink to
// one is fine). The type is checked before opening, because opening a FIFO
// for reading blocks until a writer comes; the open is non-blocking as well,
// and the type checked again on the open file, in case the path changed in
// between.
func readKeyFile(path string) (key, warning string, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", "", keyFileErr(path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if fi, err = os.Stat(path); err != nil {
			return "", "", keyFileErr(path, err)
		}
	}
	if !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("API key file %s is not a regular file (%s): refusing to read it", path, fi.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", "", keyFileErr(path, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return "", "", keyFileErr(path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("API key file %s is not a regular file (%s): refusing to read it", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile))
	if err != nil {
		return "", "", keyFileErr(path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		warning = fmt.Sprintf("API key file %s can be read by other users (mode %04o): run `chmod 600 %s`", path, perm, path)
	}
	return strings.TrimSpace(string(b)), warning, nil
}

func keyFileErr(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("reading API key file %s: %w", path, err)
}

// ReadKeyFile reads the key in a key file named by the user (a secret
// file): a regular file, its contents whitespace-stripped, with a warning
// when others may read it.
func ReadKeyFile(path string) (key, warning string, err error) { return readKeyFile(path) }
