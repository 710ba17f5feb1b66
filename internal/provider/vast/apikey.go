package vast

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ResolveAPIKey finds the key in the CLI's order: the flag, VAST_API_KEY,
// then in configDir (default $XDG_CONFIG_HOME/vastai, else
// ~/.config/vastai) the 2FA session key vast_tfa_key before vast_api_key,
// and last the legacy ~/.vast_api_key. File contents are whitespace-
// stripped. source names where the key came from (never the key itself);
// no key at all is key "" with a nil error.
func ResolveAPIKey(flag string, getenv func(string) string, configDir string) (key, source string, err error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if k := strings.TrimSpace(flag); k != "" {
		return k, "flag --api-key", nil
	}
	if k := strings.TrimSpace(getenv("VAST_API_KEY")); k != "" {
		return k, "environment VAST_API_KEY", nil
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
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("reading API key file: %w", err)
		}
		if k := strings.TrimSpace(string(b)); k != "" {
			return k, "file " + f, nil
		}
	}
	return "", "", nil
}
