package remote

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vastfleet/vastfleet/internal/shell"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// A node's results directory is read by collect, and what a node says
// about it is not trusted: it may name paths outside its directory
// (../x, /etc/x, a path through a symlink), claim any hash, list special
// files, or send an archive holding anything. Collect therefore
//   - resolves every name under the local results directory through an
//     os.Root, so that no name, symlink or ".." reaches outside it;
//   - decides what to fetch from a manifest of what it fetched before
//     (CollectManifest), never from the content of local files, so that a
//     node learns nothing about the user's files from what it is asked for;
//   - writes regular files only, never opening an existing one (a FIFO in
//     the way cannot block it), and names everything it skipped.

// Marks kept in a node's results directory: the last collect's start, and
// the start of one in progress.
const (
	CollectedMark  = ".vastfleet-collected"
	CollectStarted = ".vastfleet-collecting"
)

// CollectManifest is the file in a local results directory naming the
// hash of every file collect wrote there.
const CollectManifest = ".vastfleet-collect-manifest"

// CollectListCmd lists a node's results directory: a sha256sum line for
// each regular file, and "<type> <name>" for each entry that is neither a
// regular file nor a directory (p FIFO, c/b device, s socket, l symlink).
func CollectListCmd(dir string) string {
	return "cd " + shell.Quote(dir) + " 2>/dev/null || exit 0; touch " + CollectStarted + " && " +
		"find . -type f ! -name " + CollectStarted + " ! -name " + CollectedMark + " -exec sha256sum {} + && " +
		"for t in p c b s l; do find . -type $t -exec printf \"$t %s\\n\" {} + || exit 1; done"
}

// Listed is a regular file a node reported.
type Listed struct {
	Rel  string // slash-separated, inside the results directory
	Hash string
}

// Skipped is an entry collect left out, and why.
type Skipped struct {
	Name string // as the node gave it
	Why  string
}

// String names the entry for a person: the node's name made safe for a
// terminal (it may hold any bytes).
func (s Skipped) String() string { return termsafe.Line(s.Name + " (" + s.Why + ")") }

var specialKinds = map[string]string{"p": "a FIFO", "c": "a character device", "b": "a block device", "s": "a socket", "l": "a symlink"}

// ParseCollectList reads CollectListCmd's output: the files to consider
// and what is skipped (special files, names that leave the directory).
func ParseCollectList(out string) ([]Listed, []Skipped) {
	var files []Listed
	var skipped []Skipped
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		if kind, name, ok := strings.Cut(line, " "); ok && specialKinds[kind] != "" {
			skipped = append(skipped, Skipped{Name: name, Why: specialKinds[kind] + ", not a regular file"})
			continue
		}
		h, name, ok := strings.Cut(line, "  ")
		if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			// sha256sum starts a line with \ when it escaped the name.
			skipped = append(skipped, Skipped{Name: line, Why: "not a listing line this collect reads"})
			continue
		}
		rel, err := SafeRel(name)
		if err != nil {
			skipped = append(skipped, Skipped{Name: name, Why: err.Error()})
			continue
		}
		if seen[rel] {
			continue
		}
		seen[rel] = true
		files = append(files, Listed{Rel: rel, Hash: h})
	}
	return files, skipped
}

// SafeRel turns a name a node gave into a clean slash-separated path
// inside the results directory, or says why it cannot be one. It does not
// look at this machine's files; a symlink on the way is refused later,
// when the name is resolved through the directory's os.Root.
func SafeRel(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", errors.New("not a plain relative name")
	}
	if path.IsAbs(name) {
		return "", errors.New("an absolute path; it leaves the results directory")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", errors.New("it leaves the results directory (..)")
		}
	}
	rel := path.Clean(name)
	if rel == "." || filepath.IsAbs(filepath.FromSlash(rel)) || filepath.VolumeName(filepath.FromSlash(rel)) != "" {
		return "", errors.New("not a file inside the results directory")
	}
	first, _, _ := strings.Cut(rel, "/")
	if first == CollectManifest || strings.HasSuffix(rel, tmpSuffix) {
		return "", errors.New("a name collect keeps for itself")
	}
	return rel, nil
}

const tmpSuffix = ".vastfleet-tmp"

// Results is one node's local results directory.
type Results struct {
	root *os.Root
	have map[string]string // rel → hash written there by collect
}

// OpenResults opens (creating it) the local results directory dir.
func OpenResults(dir string) (*Results, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	r := &Results{root: root, have: map[string]string{}}
	if b, err := root.ReadFile(CollectManifest); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if h, rel, ok := strings.Cut(line, " "); ok {
				r.have[rel] = h
			}
		}
	}
	return r, nil
}

// Close releases the directory.
func (r *Results) Close() error { return r.root.Close() }

// Want is the files of a listing to fetch: those collect did not write
// with that hash, or that are no longer a regular file here.
func (r *Results) Want(files []Listed) []Listed {
	var want []Listed
	for _, f := range files {
		if r.have[f.Rel] == f.Hash {
			if fi, err := r.root.Lstat(filepath.FromSlash(f.Rel)); err == nil && fi.Mode().IsRegular() {
				continue
			}
		}
		want = append(want, f)
	}
	return want
}

// Unpack writes the regular files of a gzip'd tar that were asked for
// (want, by rel), and returns what it wrote and what it skipped. It stops
// when ctx is done.
func (r *Results) Unpack(ctx context.Context, rd io.Reader, want []Listed) (n int, size int64, skipped []Skipped, err error) {
	asked := map[string]bool{}
	for _, f := range want {
		asked[f.Rel] = true
	}
	zr, err := gzip.NewReader(rd)
	if err != nil {
		return 0, 0, nil, err
	}
	tr := tar.NewReader(zr)
	defer func() {
		if werr := r.saveManifest(); err == nil {
			err = werr
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return n, size, skipped, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, size, skipped, nil
		}
		if err != nil {
			return n, size, skipped, err
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		rel, rerr := SafeRel(strings.TrimPrefix(h.Name, "./"))
		switch {
		case rerr != nil:
			skipped = append(skipped, Skipped{Name: h.Name, Why: rerr.Error()})
			continue
		case h.Typeflag != tar.TypeReg:
			skipped = append(skipped, Skipped{Name: h.Name, Why: tarKind(h.Typeflag) + ", not a regular file"})
			continue
		case !asked[rel]:
			skipped = append(skipped, Skipped{Name: h.Name, Why: "not asked for"})
			continue
		}
		delete(asked, rel) // a second copy of a name is not asked for
		w, hash, werr := r.write(rel, tr)
		if werr != nil {
			// A symlink leading out, a directory in the way, a full
			// disk: this name is named and the others still written.
			skipped = append(skipped, Skipped{Name: h.Name, Why: werr.Error()})
			continue
		}
		r.have[rel] = hash
		n++
		size += w
	}
}

// write puts one file at rel: into a fresh temporary file (created, never
// opened if something is there) renamed over rel.
func (r *Results) write(rel string, src io.Reader) (int64, string, error) {
	p := filepath.FromSlash(rel)
	if dir := filepath.Dir(p); dir != "." {
		if err := r.root.MkdirAll(dir, 0o755); err != nil {
			return 0, "", err
		}
	}
	tmp := p + tmpSuffix
	r.root.Remove(tmp)
	fh, err := r.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	w, err := io.Copy(io.MultiWriter(fh, h), src)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.root.Rename(tmp, p)
	}
	if err != nil {
		r.root.Remove(tmp)
		return 0, "", err
	}
	return w, hex.EncodeToString(h.Sum(nil)), nil
}

func (r *Results) saveManifest() error {
	rels := make([]string, 0, len(r.have))
	for rel := range r.have {
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	var b bytes.Buffer
	for _, rel := range rels {
		fmt.Fprintf(&b, "%s %s\n", r.have[rel], rel)
	}
	tmp := CollectManifest + tmpSuffix
	r.root.Remove(tmp)
	fh, err := r.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = fh.Write(b.Bytes())
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.root.Rename(tmp, CollectManifest)
	}
	return err
}

func tarKind(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "a symlink"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeFifo:
		return "a FIFO"
	case tar.TypeChar:
		return "a character device"
	case tar.TypeBlock:
		return "a block device"
	}
	return fmt.Sprintf("tar entry type %q", t)
}

// CollectNode is one node to collect from and its local directory.
type CollectNode struct {
	Target Target
	Dir    string
}

// CollectResult is one node's outcome.
type CollectResult struct {
	Files     int // regular files the node listed
	Fetched   int
	FileBytes int64
	Skipped   []Skipped
	// Err says why the node was not collected (whole or in part).
	Err error
}

// CollectOptions tune Collect.
type CollectOptions struct {
	Parallel int
	// List runs the listing jobs; nil runs them on the pool. The CLI
	// passes one that attaches the fleet key where a node refused it.
	List func(ctx context.Context, jobs []Job) []Result
}

// Collect pulls each node's changed results under remoteDir into its
// Dir, then marks the collect on the node (CollectedMark), which destroy
// compares newer results against. It returns ctx's error when ctx ends
// first.
func Collect(ctx context.Context, p *Pool, remoteDir string, nodes []CollectNode, opts CollectOptions) ([]CollectResult, error) {
	if opts.List == nil {
		opts.List = func(ctx context.Context, jobs []Job) []Result { return p.RunAll(ctx, jobs, opts.Parallel) }
	}
	q := shell.Quote(remoteDir)
	lists := make([]bytes.Buffer, len(nodes))
	jobs := make([]Job, len(nodes))
	for i, n := range nodes {
		jobs[i] = Job{Target: n.Target, Stdout: &lists[i], Stderr: io.Discard, Cmd: CollectListCmd(remoteDir)}
	}
	first := opts.List(ctx, jobs)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := make([]CollectResult, len(nodes))
	dirs := make([]*Results, len(nodes))
	defer func() {
		for _, d := range dirs {
			if d != nil {
				d.Close()
			}
		}
	}()
	wants := make([][]Listed, len(nodes))
	archives := make([]bytes.Buffer, len(nodes))
	for i, n := range nodes {
		jobs[i].Cmd, jobs[i].Stdout = "true", io.Discard
		if !first[i].OK() {
			res[i].Err = fmt.Errorf("the node did not answer (exit %d %v); a stopped instance's files can still be copied with vast's copy", first[i].Exit, first[i].Err)
			continue
		}
		files, skipped := ParseCollectList(lists[i].String())
		res[i].Files, res[i].Skipped = len(files), skipped
		if len(files) == 0 {
			continue
		}
		d, err := OpenResults(n.Dir)
		if err != nil {
			return nil, err
		}
		dirs[i] = d
		wants[i] = d.Want(files)
		if len(wants[i]) > 0 {
			names := make([]string, len(wants[i]))
			for k, f := range wants[i] {
				names[k] = shell.Quote("./" + f.Rel)
			}
			jobs[i].Cmd = "cd " + q + " && tar czf - " + strings.Join(names, " ")
			jobs[i].Stdout = &archives[i]
		}
	}
	var done []int
	for i, r := range p.RunAll(ctx, jobs, opts.Parallel) {
		if res[i].Err != nil {
			continue
		}
		if !r.OK() {
			res[i].Err = fmt.Errorf("packing results: exit %d %v", r.Exit, r.Err)
			continue
		}
		if archives[i].Len() > 0 {
			n, size, skipped, err := dirs[i].Unpack(ctx, &archives[i], wants[i])
			res[i].Fetched, res[i].FileBytes = n, size
			res[i].Skipped = append(res[i].Skipped, skipped...)
			if err != nil {
				res[i].Err = err
				continue
			}
		}
		done = append(done, i)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// What was listed is now here: the start of this collect becomes the
	// node's mark.
	mark := make([]Job, 0, len(done))
	for _, i := range done {
		mark = append(mark, Job{Target: jobs[i].Target, Stdout: io.Discard, Stderr: io.Discard,
			Cmd: "cd " + q + " 2>/dev/null || exit 0; mv -f " + CollectStarted + " " + CollectedMark})
	}
	for k, r := range p.RunAll(ctx, mark, opts.Parallel) {
		if !r.OK() {
			res[done[k]].Err = fmt.Errorf("recording the collect on the node: exit %d %v", r.Exit, r.Err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return res, nil
}
