//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"errors"
	"os"
)

func tryFlock(*os.File) (bool, error) {
	return false, errors.New("writer lock not supported on this platform")
}

func unflock(*os.File) error { return nil }
