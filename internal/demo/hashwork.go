package demo

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Hashwork is the demo's CPU job, as the node named by
// $VASTFLEET_NODE_NAME: sha256 of "<node>-<n>" for n = 0, 1, ... for
// seconds, the hash rate (hashes_per_s) and the hashes so far (hashes) as
// metric lines on w and every hash that starts
// with prefix as a finding (and into results/found.txt).
func Hashwork(ctx context.Context, w io.Writer, prefix string, seconds float64) error {
	node := os.Getenv("VASTFLEET_NODE_NAME")
	if node == "" {
		node = "node-" + strconv.Itoa(os.Getpid())
	}
	if err := os.MkdirAll("results", 0o755); err != nil {
		return err
	}
	found, err := os.OpenFile(filepath.Join("results", "found.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer found.Close()
	out := bufio.NewWriter(w)
	defer out.Flush()
	return hashwork(ctx, node, strings.ToLower(prefix), time.Duration(seconds*float64(time.Second)), out, found)
}

func hashwork(ctx context.Context, node, prefix string, d time.Duration, out *bufio.Writer, found *os.File) error {
	start := time.Now()
	last, lastN := start, 0
	buf := make([]byte, 0, 64)
	var hexBuf [64]byte
	for n := 0; ; n++ {
		buf = strconv.AppendInt(append(append(buf[:0], node...), '-'), int64(n), 10)
		sum := sha256.Sum256(buf)
		hex.Encode(hexBuf[:], sum[:])
		if strings.HasPrefix(string(hexBuf[:len(prefix)]), prefix) {
			line, _ := json.Marshal(map[string]any{"found": map[string]string{"input": string(buf), "sha256": string(hexBuf[:])}})
			out.Write(line)
			out.WriteByte('\n')
			fmt.Fprintf(found, "%s %s\n", hexBuf[:], buf)
		}
		// The clock is read every 256 hashes (a few µs of work even on a
		// small share of a core), so that a slow machine reports its rate
		// each half second as a fast one does, not after its first 4,096.
		if n%256 == 0 {
			now := time.Now()
			if now.Sub(last) >= 500*time.Millisecond {
				fmt.Fprintf(out, "{\"metric\":\"hashes_per_s\",\"value\":%.0f}\n{\"metric\":\"hashes\",\"value\":%d}\n", float64(n-lastN)/now.Sub(last).Seconds(), n)
				out.Flush()
				last, lastN = now, n
			}
			if now.Sub(start) >= d || ctx.Err() != nil {
				fmt.Fprintf(out, "{\"metric\":\"hashes\",\"value\":%d}\n%d hashes in %s\n", n, n, now.Sub(start).Round(time.Millisecond))
				return ctx.Err()
			}
		}
	}
}

// Hashcheck is the demo's verify of one finding (its JSON on r): the hash
// must be the input's sha256 and start with prefix, so a node cannot
// report hashes it did not find.
func Hashcheck(r io.Reader, prefix string) error {
	var found struct {
		Input  string `json:"input"`
		SHA256 string `json:"sha256"`
	}
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&found); err != nil {
		return fmt.Errorf("hashcheck: the finding on stdin: %w", err)
	}
	sum := sha256.Sum256([]byte(found.Input))
	if got := hex.EncodeToString(sum[:]); got != found.SHA256 || !strings.HasPrefix(got, strings.ToLower(prefix)) {
		return fmt.Errorf("hashcheck: sha256(%q) is %s, not the reported %q with prefix %q", found.Input, got, found.SHA256, prefix)
	}
	return nil
}

// ValidPrefix says whether prefix is up to 16 hex digits.
func ValidPrefix(prefix string) bool {
	_, err := hex.DecodeString(prefix + strings.Repeat("0", len(prefix)%2))
	return err == nil && len(prefix) <= 16
}
