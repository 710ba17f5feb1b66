//go:build !linux

package search

import (
	"errors"
	"os"
)

func mmapPopulate(*os.File, int) ([]byte, error) { return nil, errors.New("no mmap here") }

func munmap([]byte) error { return nil }
