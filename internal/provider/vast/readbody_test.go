package vast

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadBodyBySize: with a Content-Length the body lands in one buffer
// of exactly that size; a wrong or missing length still reads the whole
// body, within maxBody.
func TestReadBodyBySize(t *testing.T) {
	body := strings.Repeat(`{"offers":[]}`, 1000)
	for _, tc := range []struct {
		name   string
		length int64
	}{{"exact", int64(len(body))}, {"unknown", -1}, {"zero", 0}, {"too small", 10}, {"over the bound", maxBody + 5}} {
		// One byte per Read: the buffer must fill across many reads.
		got, err := readBody(iotest.OneByteReader(strings.NewReader(body)), tc.length)
		if err != nil || string(got) != body {
			t.Errorf("%s: %d bytes, %v", tc.name, len(got), err)
		}
		if tc.name == "exact" && cap(got) != len(body)+1 {
			t.Errorf("exact: buffer cap %d for a %d-byte body: not sized from the length", cap(got), len(body))
		}
	}
	// Shorter than announced: an error, as net/http gives.
	if _, err := readBody(strings.NewReader(body), int64(len(body))+10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short body: %v", err)
	}
	// A body over maxBody is cut at maxBody+1 whatever the length says,
	// so the caller sees it is too large.
	big := bytes.NewReader(make([]byte, maxBody+100))
	got, err := readBody(big, 100)
	if err != nil || len(got) != maxBody+1 {
		t.Errorf("oversized body: %d bytes, %v", len(got), err)
	}
}
