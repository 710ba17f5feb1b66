package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/provider"
	"github.com/vastfleet/vastfleet/internal/remote"
)

// syncManifest is the file on each node naming the content hash of every
// file synced there, so an unchanged file is never sent again.
const syncManifest = ".vastfleet-sync"

// defaultExcludes keep weights, data and caches off the wire.
var defaultExcludes = []string{"*.pt", "*.pth", "*.ckpt", "__pycache__", ".git", "data", "wandb", "outputs", syncManifest}

type treeFile struct {
	rel  string
	hash string
	mode fs.FileMode
	size int64
}

// scanTree hashes every file under src that no exclude matches (by base
// name, as .gitignore patterns without a slash do).
func scanTree(src string, excludes []string) ([]treeFile, error) {
	var files []treeFile
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != src {
			for _, pat := range excludes {
				if ok, _ := path.Match(pat, d.Name()); ok {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
			}
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files = append(files, treeFile{rel: filepath.ToSlash(rel), hash: hex.EncodeToString(sum[:]), mode: info.Mode().Perm(), size: int64(len(b))})
		return nil
	})
	return files, err
}

func manifestText(files []treeFile) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s %s\n", f.hash, f.rel)
	}
	return b.String()
}

// syncArchive is a gzip'd tar of the files whose hash the node lacks, plus
// the new manifest.
func syncArchive(src string, files []treeFile, have map[string]string) ([]byte, int, int64, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	sent, fileBytes := 0, int64(0)
	for _, f := range files {
		if have[f.rel] == f.hash {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.rel)))
		if err != nil {
			return nil, 0, 0, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.rel, Mode: int64(f.mode), Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return nil, 0, 0, err
		}
		tw.Write(b)
		sent++
		fileBytes += int64(len(b))
	}
	m := manifestText(files)
	tw.WriteHeader(&tar.Header{Name: syncManifest, Mode: 0o644, Size: int64(len(m)), Typeflag: tar.TypeReg})
	io.WriteString(tw, m)
	if err := tw.Close(); err != nil {
		return nil, 0, 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, 0, 0, err
	}
	return buf.Bytes(), sent, fileBytes, nil
}

type syncRow struct {
	Node      string `json:"node"`
	ID        int64  `json:"id"`
	FilesSent int    `json:"files_sent"`
	FileBytes int64  `json:"file_bytes"`
	WireBytes int64  `json:"wire_bytes"`
	Error     string `json:"error,omitempty"`
}

func newSyncCmd(f *factory) *cobra.Command {
	var fleetName, dest string
	var all, asJSON bool
	var excludes []string
	var parallel int
	cmd := &cobra.Command{
		Use:   "sync [SRC] (--fleet F | --all | --id ID...) [--dest /workspace/project] [--exclude PAT...]",
		Short: "Push a working tree to nodes as a compressed tar of the files each node lacks (by content hash)",
		Long: `Hashes every file of SRC (default .), asks each node for the hashes it holds
(DEST/.vastfleet-sync) and sends a gzip'd tar of only the files that differ.
Excluded by base name: ` + strings.Join(defaultExcludes[:len(defaultExcludes)-1], " ") + ` and each --exclude.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src := "."
			if len(args) == 1 {
				src = args[0]
			}
			ids, _ := cmd.Flags().GetStringSlice("id")
			files, err := scanTree(src, append(slices.Clone(defaultExcludes), excludes...))
			if err != nil {
				return fmt.Errorf("reading %s: %w", src, err)
			}
			nodes, p, err := f.selectNodes(ctx, fleetName, all, ids, true)
			if err != nil {
				return err
			}
			rows, err := syncNodes(ctx, f, p, nodes, src, files, dest, parallel)
			if err != nil {
				return err
			}
			failed := 0
			for _, r := range rows {
				if r.Error != "" {
					failed++
				}
			}
			if asJSON {
				if err := writeJSON(f.io.Out, rows); err != nil {
					return err
				}
			} else {
				tw := newTable(f.io.Out, "NODE", "ID", "FILES SENT", "FILE BYTES", "WIRE BYTES", "ERROR")
				for _, r := range rows {
					tw.row(r.Node, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.FilesSent), strconv.FormatInt(r.FileBytes, 10), strconv.FormatInt(r.WireBytes, 10), dash(r.Error))
				}
				if err := tw.flush(); err != nil {
					return err
				}
			}
			return fanOutError("sync", failed, len(rows))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&fleetName, "fleet", "", "sync to this fleet's live instances")
	fl.BoolVar(&all, "all", false, "sync to every live instance")
	fl.StringSlice("id", nil, "sync to these instance IDs")
	fl.StringVar(&dest, "dest", "/workspace/project", "directory on the nodes")
	fl.StringSliceVar(&excludes, "exclude", nil, "more base-name patterns to leave out")
	fl.IntVar(&parallel, "parallel", 64, "nodes at once")
	limitFlags(fl, bounds{"parallel", "1", "1024"})
	fl.BoolVar(&asJSON, "json", false, "print the per-node table as JSON")
	return cmd
}

// syncNodes sends each node the files of src (scanned as files) that it
// lacks under dest.
func syncNodes(ctx context.Context, f *factory, p provider.Provider, nodes []node, src string, files []treeFile, dest string, parallel int) ([]syncRow, error) {
	s, err := f.sshSession(ctx, p, parallel)
	if err != nil {
		return nil, err
	}
	known, err := s.key.hostKeys()
	if err != nil {
		return nil, err
	}
	if f.opts.Market == "sim" {
		dest = simRelative(dest)
	}
	qdest := remote.Quote(dest)
	manifests := make([]bytes.Buffer, len(nodes))
	jobs := make([]remote.Job, len(nodes))
	for i, n := range nodes {
		jobs[i] = remote.Job{Target: s.target(n, known), Cmd: "cat " + qdest + "/" + syncManifest + " 2>/dev/null; true", Stdout: &manifests[i], Stderr: io.Discard}
	}
	first := s.run(ctx, nodes, jobs, parallel)
	rows := make([]syncRow, len(nodes))
	for i, n := range nodes {
		rows[i] = syncRow{Node: n.Name, ID: n.ID}
		if !first[i].OK() {
			rows[i].Error = fmt.Sprint(first[i].Err)
			jobs[i].Cmd = "true"
			continue
		}
		have := map[string]string{}
		for _, line := range strings.Split(manifests[i].String(), "\n") {
			if h, rel, ok := strings.Cut(line, " "); ok {
				have[rel] = h
			}
		}
		archive, sent, fileBytes, err := syncArchive(src, files, have)
		if err != nil {
			return nil, err
		}
		rows[i].FilesSent, rows[i].FileBytes, rows[i].WireBytes = sent, fileBytes, int64(len(archive))
		jobs[i].Cmd = "mkdir -p " + qdest + " && tar xzf - -C " + qdest
		jobs[i].Stdin = bytes.NewReader(archive)
		jobs[i].Stdout = io.Discard
	}
	for i, r := range s.pool.RunAll(ctx, jobs, parallel) {
		if rows[i].Error == "" && !r.OK() {
			rows[i].Error = fmt.Sprintf("unpacking: exit %d %v", r.Exit, r.Err)
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rows, nil
}
