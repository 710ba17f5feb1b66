//go:build !linux

package cli

import (
	"errors"
	"os"
)

func mmapPopulate(*os.File, int) ([]byte, error) { return nil, errors.New("no mmap here") }

func munmap([]byte) error { return nil }
