package remote

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/vastfleet/vastfleet/internal/shell"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// SyncManifest is the file in a node's destination naming the content
// hash of every file synced there, so an unchanged file is never sent
// again. Archives being relayed sit beside it as SyncManifest-<hash>.tgz.
const SyncManifest = ".vastfleet-sync"

// SyncProbe is the command that reports what a node holds in dest and
// whether it can relay (it has an ssh client).
func SyncProbe(dest string) string {
	return "if command -v ssh >/dev/null 2>&1; then echo relay=yes; else echo relay=no; fi; cat " +
		shell.Quote(dest) + "/" + SyncManifest + " 2>/dev/null; true"
}

// NodeState is what SyncProbe found on a node.
type NodeState struct {
	CanRelay bool
	Manifest string // the manifest's text, "" when the node holds none
}

// ParseSyncProbe reads SyncProbe's output.
func ParseSyncProbe(out string) NodeState {
	first, rest, _ := strings.Cut(out, "\n")
	return NodeState{CanRelay: first == "relay=yes", Manifest: rest}
}

// ManifestText is the manifest for files.
func ManifestText(files []TreeFile) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s %s\n", f.Hash, f.Rel)
	}
	return b.String()
}

func parseManifest(text string) map[string]string {
	have := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if h, rel, ok := strings.Cut(line, " "); ok {
			have[rel] = h
		}
	}
	return have
}

// Archive is a gzip'd tar of the files a node lacks, plus the new manifest.
type Archive struct {
	Data      []byte
	Files     int
	FileBytes int64
}

// BuildArchive packs the files of root whose hash differs from the node's
// manifest.
func BuildArchive(root string, files []TreeFile, nodeManifest string) (Archive, error) {
	have := parseManifest(nodeManifest)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	var a Archive
	for _, f := range files {
		if have[f.Rel] == f.Hash {
			continue
		}
		if err := addFile(tw, filepath.Join(root, filepath.FromSlash(f.Rel)), f); err != nil {
			return Archive{}, err
		}
		a.Files++
		a.FileBytes += f.Size
	}
	m := ManifestText(files)
	if err := tw.WriteHeader(&tar.Header{Name: SyncManifest, Mode: 0o644, Size: int64(len(m)), Typeflag: tar.TypeReg}); err != nil {
		return Archive{}, err
	}
	io.WriteString(tw, m)
	if err := tw.Close(); err != nil {
		return Archive{}, err
	}
	if err := zw.Close(); err != nil {
		return Archive{}, err
	}
	a.Data = buf.Bytes()
	return a, nil
}

func addFile(tw *tar.Writer, p string, f TreeFile) error {
	fh, err := os.Open(p)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := tw.WriteHeader(&tar.Header{Name: f.Rel, Mode: int64(f.Mode), Size: f.Size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	// The size was taken when the file was hashed; a file changed since
	// fails here rather than sending a torn copy.
	if _, err := io.CopyN(tw, fh, f.Size); err != nil {
		return fmt.Errorf("%s changed while syncing: %w", f.Rel, err)
	}
	return nil
}

// SyncNode is one node to sync and what it holds.
type SyncNode struct {
	Target Target
	State  NodeState
	// UpMbps is the node's uplink as its offer lists it (inet_up), 0 when
	// unknown: the faster a node sends, the sooner it relays.
	UpMbps float64
}

// SyncOptions tune Sync.
type SyncOptions struct {
	Dest string // the directory on the nodes
	// Seeds is how many nodes of a group this process sends the archive
	// to itself; the others get it relayed node to node [3].
	Seeds int
	// Relay lets nodes pass the archive on to each other. No key of the
	// account ever leaves this machine for it: each push gets a fresh key
	// pair that opens only its target, only to receive that archive, for
	// RelayKeyTTL at most, and is removed from the target when the push
	// ends (see relay). False: this process sends to every node.
	Relay bool
	// Parallel bounds the sends this process makes at once without relay
	// [16].
	Parallel int
}

// SyncResult is one node's outcome.
type SyncResult struct {
	Files     int   // files sent
	FileBytes int64 // their size
	WireBytes int64 // the archive's size
	// Via names the node that relayed the archive; "" when this process
	// sent it (or nothing was sent).
	Via string
	// Took is how long after the sync began the node held the tree (0
	// when nothing was sent).
	Took time.Duration
	Err  error
}

// Sync brings every node's dest to the tree's state. Nodes holding the
// same manifest need the same archive, so it is built once per group;
// within a group this process sends it to Seeds nodes, and every node that
// has it passes it on to one node at a time (a binomial tree over the
// group: the holders double each round). The fastest uplinks are sent to
// first and relay first, so the tree doubles at the speed of its best
// links. A relay that fails is retried directly from here, and the node
// that failed relays no more.
func Sync(ctx context.Context, p *Pool, root string, files []TreeFile, nodes []SyncNode, opts SyncOptions) []SyncResult {
	began := time.Now()
	if opts.Seeds <= 0 {
		opts.Seeds = 3
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 16
	}
	results := make([]SyncResult, len(nodes))
	want := ManifestText(files)
	groups := map[string][]int{}
	var order []string
	for i, n := range nodes {
		if n.State.Manifest == want {
			continue // up to date: nothing to send
		}
		if _, ok := groups[n.State.Manifest]; !ok {
			order = append(order, n.State.Manifest)
		}
		groups[n.State.Manifest] = append(groups[n.State.Manifest], i)
	}
	var wg sync.WaitGroup
	for _, m := range order {
		members := groups[m]
		a, err := BuildArchive(root, files, m)
		if err != nil {
			for _, i := range members {
				results[i].Err = err
			}
			continue
		}
		for _, i := range members {
			results[i].Files, results[i].FileBytes, results[i].WireBytes = a.Files, a.FileBytes, int64(len(a.Data))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &distribution{p: p, opts: opts, nodes: nodes, results: results, archive: a.Data, began: began}
			d.run(ctx, members)
		}()
	}
	wg.Wait()
	return results
}

// distribution spreads one archive over a group of nodes.
type distribution struct {
	p       *Pool
	opts    SyncOptions
	nodes   []SyncNode
	results []SyncResult
	archive []byte
	name    string // the archive's file name in dest
	sum     string // the archive's hex SHA-256, checked by every receiver
	tag     string // names this distribution's relay keys on the targets
	began   time.Time
}

type outcome struct {
	source, target int // source -1: this process
	err            error
}

func (d *distribution) run(ctx context.Context, members []int) {
	sum := sha256.Sum256(d.archive)
	d.name = SyncManifest + "-" + hex.EncodeToString(sum[:6]) + ".tgz"
	d.sum = hex.EncodeToString(sum[:])
	var id [6]byte
	rand.Read(id[:])
	d.tag = relayTag + hex.EncodeToString(id[:]) + "-"
	relay := d.opts.Relay && len(members) > d.opts.Seeds
	// Seeds that can pass the archive on come first, the fastest senders
	// first among them: each relays sooner and more often.
	pending := slices.Clone(members)
	slices.SortStableFunc(pending, func(a, b int) int {
		if c := boolRank(d.nodes[b].State.CanRelay) - boolRank(d.nodes[a].State.CanRelay); c != 0 {
			return c
		}
		return cmp.Compare(d.nodes[b].UpMbps, d.nodes[a].UpMbps)
	})
	// addSource keeps the idle relays fastest first, equal speeds in the
	// order they came.
	addSource := func(sources []int, s int) []int {
		at := slices.IndexFunc(sources, func(i int) bool { return d.nodes[i].UpMbps < d.nodes[s].UpMbps })
		if at < 0 {
			at = len(sources)
		}
		return slices.Insert(sources, at, s)
	}
	var direct, sources []int
	slots, seeded, inflight := d.opts.Parallel, 0, 0
	if relay {
		slots = d.opts.Seeds
	}
	done := make(chan outcome)
	for {
		for slots > 0 && (len(direct) > 0 || len(pending) > 0 && (!relay || seeded < d.opts.Seeds)) {
			var t int
			if len(direct) > 0 {
				t, direct = direct[0], direct[1:]
			} else {
				t, pending = pending[0], pending[1:]
				seeded++
			}
			slots--
			inflight++
			go func() { done <- outcome{source: -1, target: t, err: d.send(ctx, t, relay)} }()
		}
		for len(sources) > 0 && len(pending) > 0 {
			s, t := sources[0], pending[0]
			sources, pending = sources[1:], pending[1:]
			inflight++
			go func() { done <- outcome{source: s, target: t, err: d.relay(ctx, s, t)} }()
		}
		if inflight == 0 {
			if len(pending) == 0 {
				break
			}
			// Nobody left to relay: this process sends the rest.
			direct, pending = append(direct, pending...), nil
			continue
		}
		o := <-done
		inflight--
		switch {
		case o.source < 0:
			slots++
			if o.err != nil {
				d.results[o.target].Err = o.err
				continue
			}
		case o.err != nil:
			// Either end may be at fault; the target is sent to directly,
			// and the source relays no more.
			direct = append(direct, o.target)
			continue
		default:
			sources = addSource(sources, o.source)
			d.results[o.target].Via = d.nodes[o.source].Target.Name
		}
		d.results[o.target].Took = time.Since(d.began)
		if relay && d.nodes[o.target].State.CanRelay {
			sources = addSource(sources, o.target)
		}
	}
	if relay {
		d.cleanup(ctx, members)
	}
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// receiveCmd unpacks an archive arriving on stdin into dest; keep leaves
// the archive in dest for the node to relay, once its SHA-256 is sum (a
// relaying node cannot pass on anything else).
func receiveCmd(dest, name, sum string, keep bool) string {
	q := shell.Quote(dest)
	if !keep {
		return "mkdir -p " + q + " && tar xzf - -C " + q
	}
	f := q + "/" + name
	return "mkdir -p " + q + " && cat > " + f + ".part && " +
		"{ sha256sum " + f + ".part | cut -c1-64 | grep -qx " + sum + " || { echo 'the relayed archive is not the one sent' >&2; rm -f " + f + ".part; exit 1; }; } && " +
		"mv " + f + ".part " + f + " && tar xzf " + f + " -C " + q
}

// send streams the archive from this process to node t.
func (d *distribution) send(ctx context.Context, t int, keep bool) error {
	tg := d.nodes[t].Target
	c, err := d.p.Connect(ctx, tg)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	code, err := c.Run(ctx, receiveCmd(d.opts.Dest, d.name, d.sum, keep), bytes.NewReader(d.archive), io.Discard, &stderr)
	return unpackError(code, err, stderr.String())
}

func unpackError(code int, err error, stderr string) error {
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("unpacking: exit %d: %s", code, strings.TrimSpace(lastLine(stderr)))
	}
	return nil
}

// lastLine is the last line of a node's stderr, for an error message:
// made safe for the terminal, as a node may write anything there.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return termsafe.Line(s[strings.LastIndex(s, "\n")+1:])
}

// relayAlias is the name the relaying node's ssh checks the target's
// host key under, in a known_hosts file holding that one key.
const relayAlias = "vastfleet-relay"

// relayTag starts the comment of every relay key installed on a target,
// so that what a push installs can be found and removed.
const relayTag = "vastfleet-relay-"

// RelayKeyTTL bounds how long a relay key opens its target if this process
// dies before removing it: sshd refuses it after its expiry-time. An
// established push is not cut by it.
const RelayKeyTTL = 10 * time.Minute

// relay has node s push its copy of the archive to node t with the
// system ssh client.
//
// The credential is made for this one push: a fresh ed25519 key pair.
// Its public key goes into t's authorized_keys as
// restrict,expiry-time=...,command="<receive this archive>", so it can
// run nothing but the receive of an archive with this hash, opens no
// forwarding and no terminal, and stops opening t after RelayKeyTTL; the
// line is removed when the push ends however it ends. The private key
// reaches s on stdin into a directory only the push can read, removed
// when the push ends. A node that keeps it holds a key that opened one
// target for one upload and opens nothing once the push is over; the
// account's key never leaves this machine. The target's host key is the
// one this process recorded, checked strictly.
func (d *distribution) relay(ctx context.Context, s, t int) error {
	src, dst := d.nodes[s].Target, d.nodes[t].Target
	tc, err := d.p.Connect(ctx, dst)
	if err != nil {
		return err
	}
	sc, err := d.p.Connect(ctx, src)
	if err != nil {
		return err
	}
	key, line, tag, err := d.edgeKey(s, t)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	code, err := tc.Run(ctx, installKeyCmd(line), nil, io.Discard, &stderr)
	if err != nil || code != 0 {
		return fmt.Errorf("relay %s → %s: installing the transfer key: exit %d %v: %s", src.Name, dst.Name, code, err, lastLine(stderr.String()))
	}
	defer func() {
		// Also after an interrupt: the key must not outlive the push.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		tc.Run(rctx, removeKeysCmd(tag), nil, io.Discard, io.Discard)
	}()
	known := relayAlias + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(tc.HostKey())))
	archive := shell.Quote(d.opts.Dest) + "/" + d.name
	cmd := `umask 077; d=$(mktemp -d) || exit 1; trap 'rm -rf "$d"' EXIT; trap 'exit 129' HUP; trap 'exit 143' TERM INT; ` +
		`cat > "$d/k" && printf '%s\n' ` + shell.Quote(known) + ` > "$d/kh" && ` +
		`ssh -F /dev/null -i "$d/k" -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes ` +
		`-o UserKnownHostsFile="$d/kh" -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o HostKeyAlias=` + relayAlias + ` ` +
		`-o ConnectTimeout=20 -o ServerAliveInterval=15 -o ServerAliveCountMax=3 -o LogLevel=ERROR ` +
		`-p ` + strconv.Itoa(dst.Port) + ` -l ` + shell.Quote(dst.User) + ` ` + shell.Quote(dst.Host) + ` receive < ` + archive
	stderr.Reset()
	code, err = sc.Run(ctx, cmd, bytes.NewReader(key), io.Discard, &stderr)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("relay %s → %s: exit %d: %s", src.Name, dst.Name, code, lastLine(stderr.String()))
	}
	return nil
}

// edgeKey makes the key pair for one push from s to t: the private key
// (OpenSSH PEM), the public key's authorized_keys line without its
// expiry (installKeyCmd adds it on the target, by the target's clock),
// and the tag that line carries.
func (d *distribution) edgeKey(s, t int) (priv []byte, line, tag string, err error) {
	pub, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", "", err
	}
	block, err := ssh.MarshalPrivateKey(sk, "")
	if err != nil {
		return nil, "", "", err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", "", err
	}
	tag = d.tag + strconv.Itoa(s) + "-" + strconv.Itoa(t)
	forced := strings.ReplaceAll(receiveCmd(d.opts.Dest, d.name, d.sum, true), `"`, `\"`)
	line = `,command="` + forced + `" ` + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " " + tag
	return pem.EncodeToMemory(block), line, tag, nil
}

// installKeyCmd appends a relay key to the node's authorized_keys, its
// expiry RelayKeyTTL from now on the node's clock (sshd compares it with
// that clock, in the node's time zone).
func installKeyCmd(line string) string {
	ttl := strconv.Itoa(int(RelayKeyTTL / time.Second))
	return `umask 077; mkdir -p "$HOME/.ssh" && e=$(date -d @$(( $(date +%s) + ` + ttl + ` )) +%Y%m%d%H%M%S) && ` +
		`printf '%s%s%s\n' 'restrict,expiry-time="' "$e" ` + shell.Quote(`"`+line) + ` >> "$HOME/.ssh/authorized_keys"`
}

// removeKeysCmd removes every authorized_keys line carrying tag (a relay
// tag or a prefix of several), keeping the file's inode and mode.
func removeKeysCmd(tag string) string {
	return `f="$HOME/.ssh/authorized_keys"; [ -f "$f" ] || exit 0; t="$f.vastfleet-$$"; ` +
		`grep -vF -- ` + shell.Quote(tag) + ` "$f" > "$t"; cat "$t" > "$f" && rm -f "$t"`
}

// cleanup removes the kept archive, any part of one a failed push left,
// and any relay key of this distribution still installed, from every node
// of the group, also after an interrupt.
func (d *distribution) cleanup(ctx context.Context, nodes []int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	jobs := make([]Job, len(nodes))
	for i, n := range nodes {
		jobs[i] = Job{Target: d.nodes[n].Target, Cmd: removeKeysCmd(d.tag) + "; cd " + shell.Quote(d.opts.Dest) + " 2>/dev/null && rm -f " + d.name + " " + d.name + ".part; true", Stdout: io.Discard, Stderr: io.Discard}
	}
	d.p.RunAll(ctx, jobs, d.opts.Parallel)
}
