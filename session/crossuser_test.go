package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/credstore"
	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/sandbox/confine"
)

// TestMain lets this test binary be the sandbox's helper and the
// evidence reader, as cmd/sandboxd is: the cross-user tests run the
// real sandbox.
func TestMain(m *testing.M) {
	switch {
	case confine.IsHelper(os.Args):
		confine.Main()
	case confine.IsProbe(os.Args):
		confine.ProbeMain()
	case evidence.IsReader(os.Args):
		os.Exit(evidence.Reader(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// Two unprivileged users, by ids alone: a Caller is ids, not an
// account, and a daemon serves callers by what their socket says.
const (
	aliceID  = 64201
	bobID    = 64202
	sharedID = 64250 // a group alice and bob are both in
)

// crossUser is the tree the cross-user tests work in: each user's home
// (0700) with a workspace, and bob's files alice must never reach.
type crossUser struct {
	base, alice, bob string
}

func newCrossUser(t *testing.T) *crossUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test is a root process serving callers of other uids")
	}
	// Not under /tmp: inside the sandbox /tmp is private.
	os.MkdirAll("/var/lib/sandboxd-test", 0o755)
	base, err := os.MkdirTemp("/var/lib/sandboxd-test", "xuser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	x := &crossUser{base: base, alice: filepath.Join(base, "alice"), bob: filepath.Join(base, "bob")}
	mk := func(path string, uid, gid int, mode os.FileMode, data string) {
		t.Helper()
		var err error
		if strings.HasSuffix(path, "/") {
			err = os.Mkdir(path, mode)
		} else {
			err = os.WriteFile(path, []byte(data), mode)
		}
		if err == nil {
			err = os.Chown(path, uid, gid)
		}
		if err == nil {
			err = os.Chmod(path, mode)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	mk(x.alice+"/", aliceID, aliceID, 0o700, "")
	mk(x.alice+"/ws/", aliceID, aliceID, 0o755, "")
	mk(x.alice+"/ws/notes.txt", aliceID, aliceID, 0o644, "alice's notes\n")
	mk(x.alice+"/policy.toml", aliceID, aliceID, 0o600, "[filesystem]\nwritable = [\""+x.bob+"/private\"]\n")
	mk(x.bob+"/", bobID, bobID, 0o711, "")
	mk(x.bob+"/private/", bobID, bobID, 0o700, "")
	mk(x.bob+"/private/secret.txt", bobID, bobID, 0o600, "bob's secret\n")
	mk(x.bob+"/pub/", bobID, bobID, 0o755, "")
	mk(x.bob+"/pub/victim.txt", bobID, bobID, 0o644, "bob's file\n")
	mk(x.bob+"/policy.toml", bobID, bobID, 0o600, "[filesystem]\nwritable = [\"/\"]\n")
	mk(x.bob+"/state/", bobID, bobID, 0o700, "")
	mk(x.bob+"/shared/", bobID, sharedID, 0o2775, "")
	return x
}

// caller is alice, in her workspace, with env added to her environment.
func (x *crossUser) caller(t *testing.T, groups []int, env ...string) Caller {
	t.Helper()
	environ := append([]string{"HOME=" + x.alice, "PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
	c, err := NewCaller(aliceID, aliceID, environ, filepath.Join(x.alice, "ws"), 0o022)
	if err != nil {
		t.Fatal(err)
	}
	c.Groups = groups
	return c
}

// snapshot is every entry below dir: path, mode, owner and content.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		info, _ := d.Info()
		st := info.Sys().(*syscall.Stat_t)
		sum := ""
		if info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			h := sha256.Sum256(data)
			sum = hex.EncodeToString(h[:8])
		}
		fmt.Fprintf(&b, "%s %v %d:%d %s %d\n", p, info.Mode(), st.Uid, st.Gid, sum, st.Ctim.Nano())
		return nil
	})
	return b.String()
}

// lockedBuffer is one buffer for both of the command's streams, which
// the sandbox relays from two goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runAs runs argv for c with the real sandbox and returns the report,
// the command's output and the error.
func runAs(t *testing.T, c Caller, job Job) (*Report, string, error) {
	t.Helper()
	out := &lockedBuffer{}
	job.Stdout, job.Stderr = out, out
	if job.Reviewer == "" {
		job.Reviewer = ReviewOff
	}
	r := New(Config{EvidenceReader: []string{"/proc/self/exe", evidence.ReaderArg}})
	rep, err := r.Run(context.Background(), c, job, nil)
	return rep, out.String(), err
}

// TestCrossUserRefused: a root process running session for alice
// cannot be made to read, write, commit into, recover into or
// quarantine in bob's directories, nor to read bob's private file as
// evidence; each attempt is refused with a clear error and bob's files
// are unchanged.
func TestCrossUserRefused(t *testing.T) {
	x := newCrossUser(t)
	before := snapshot(t, x.bob)
	alice := x.caller(t, []int{aliceID})
	cases := []struct {
		name   string
		caller Caller
		job    Job
		// want is in the public error; wantExit, when non-zero, is the
		// command's status instead (the command ran, and the kernel
		// refused it as alice).
		want     string
		wantExit bool
	}{
		{name: "workspace in bob's private directory", caller: alice,
			job:  Job{Argv: []string{"sh", "-c", "echo x > mine"}, Workspace: x.bob + "/private"},
			want: "permission denied"},
		{name: "through the layer into bob's readable directory", caller: alice,
			job:      Job{Argv: []string{"sh", "-c", "echo x > mine; echo y > victim.txt; rm -f victim.txt"}, Workspace: x.bob + "/pub"},
			wantExit: true},
		{name: "straight into bob's readable directory", caller: alice,
			job:      Job{Argv: []string{"sh", "-c", "echo x > mine; echo y > victim.txt; rm -f victim.txt"}, Workspace: x.bob + "/pub", NoTransaction: true},
			wantExit: true},
		{name: "bob's private policy", caller: alice,
			job:  Job{Argv: []string{"true"}, Policy: x.bob + "/policy.toml"},
			want: "policy"},
		{name: "a writable root of bob's", caller: alice,
			job:  Job{Argv: []string{"sh", "-c", "echo x > " + x.bob + "/private/mine"}, Policy: x.alice + "/policy.toml"},
			want: "filesystem.writable"},
		{name: "state in bob's directory", caller: x.caller(t, []int{aliceID}, "XDG_STATE_HOME="+x.bob+"/state"),
			job:  Job{Argv: []string{"sh", "-c", "echo x > mine"}},
			want: "permission denied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, out, err := runAs(t, tc.caller, tc.job)
			switch {
			case tc.wantExit:
				// The kernel refuses the command as alice, or the
				// commit of what the layer held, each change named.
				if err == nil && rep.ExitCode == 0 && !commitRefused(rep, "mine", "victim.txt") {
					b, _ := json.Marshal(rep.Transaction)
					t.Errorf("the command succeeded as alice in bob's directory: %s; transaction %s", out, b)
				}
				if err != nil && !strings.Contains(Public(err), "could not be committed") {
					t.Errorf("refused, but not as a commit: %q (cause %v)", Public(err), err)
				}
			case err == nil:
				t.Errorf("not refused: exit %d, output %q", rep.ExitCode, out)
			case !strings.Contains(strings.ToLower(Public(err)), tc.want):
				t.Errorf("refused, but the error does not say %q: %q (cause: %v)", tc.want, Public(err), err)
			}
			if after := snapshot(t, x.bob); after != before {
				t.Fatalf("bob's files changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// commitRefused reports whether rep's commit refused each path for want
// of permission.
func commitRefused(rep *Report, paths ...string) bool {
	if rep.Transaction == nil || rep.Transaction.Committed == nil {
		return false
	}
	for _, p := range paths {
		if !slices.ContainsFunc(rep.Transaction.Committed.Conflicts, func(c layer.Conflict) bool {
			return c.Path == p && strings.Contains(c.Why, "permission denied")
		}) {
			return false
		}
	}
	return true
}

// TestCrossUserRecover: a journal in alice's state naming bob's
// workspace (forged: alice owns her state) makes recovery change
// nothing of bob's.
func TestCrossUserRecover(t *testing.T) {
	x := newCrossUser(t)
	alice := x.caller(t, []int{aliceID})
	before := snapshot(t, x.bob)
	txn := layer.Where(alice.Layout().State)
	for _, d := range []string{filepath.Dir(alice.StateHome), alice.StateHome, alice.Layout().State, txn, filepath.Join(txn, "forged.stage")} {
		os.MkdirAll(d, 0o700)
		os.Chown(d, aliceID, aliceID)
	}
	rec := map[string]any{"version": 2, "run_id": "forged", "workspace": x.bob + "/pub", "state": "staged",
		"stage": filepath.Join(txn, "forged.stage"),
		"ops": []map[string]any{
			{"k": "remove", "p": "victim.txt", "u": bobID, "g": bobID},
			{"k": "symlink", "p": "planted", "t": "/etc/passwd", "u": aliceID, "g": aliceID},
		}}
	b, _ := json.Marshal(rec)
	journal := filepath.Join(txn, "forged.journal")
	if err := os.WriteFile(journal, b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(journal, aliceID, aliceID)
	out, err := layer.Recover(alice.Layout().State, alice.ID(), nil)
	t.Logf("recovered %+v, err %v", out, err)
	if after := snapshot(t, x.bob); after != before {
		t.Fatalf("recovery for alice changed bob's files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Said as an error, or as each op refused for want of permission.
	refused := 0
	for _, r := range out {
		for _, c := range r.Conflicts {
			if strings.Contains(c.Why, "permission denied") {
				refused++
			}
		}
	}
	if err == nil && refused != 2 {
		t.Errorf("recovery into bob's directory reported neither an error nor the refused ops: %+v", out)
	}
}

// TestCrossUserEvidence: the reviewer's evidence is read as alice: her
// own file reads, bob's private file does not.
func TestCrossUserEvidence(t *testing.T) {
	x := newCrossUser(t)
	alice := x.caller(t, []int{aliceID})
	r := New(Config{EvidenceReader: []string{"/proc/self/exe", evidence.ReaderArg}})
	p, err := r.newPlan(context.Background(), alice, Job{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	open := r.viewOpener(p.spec)
	cl, err := open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got, err := cl.Read(filepath.Join(x.alice, "ws", "notes.txt"), 1<<10); err != nil || string(got) != "alice's notes\n" {
		t.Errorf("alice's own file as evidence: %q, %v", got, err)
	}
	if got, err := cl.Read(filepath.Join(x.bob, "private", "secret.txt"), 1<<10); err == nil || bytes.Contains(got, []byte("secret")) {
		t.Errorf("bob's private file read as evidence for alice: %q, %v", got, err)
	}
}

// TestCrossUserOwnFiles: what sandboxd makes for alice is alice's — the
// command runs as alice (not as the owner of the workspace, not as an
// unprivileged stand-in), what it commits is hers, and so is every
// file of her state — and in a workspace bob owns but shares with her
// group it still runs as alice.
func TestCrossUserOwnFiles(t *testing.T) {
	x := newCrossUser(t)
	alice := x.caller(t, []int{aliceID, sharedID})
	for _, ws := range []string{filepath.Join(x.alice, "ws"), filepath.Join(x.bob, "shared")} {
		rep, out, err := runAs(t, alice, Job{Argv: []string{"sh", "-c", "id -u; id -G; echo made > made.txt"}, Workspace: ws})
		if err != nil || rep.ExitCode != 0 {
			t.Fatalf("%s: exit %d, err %v: %s", ws, rep.ExitCode, err, out)
		}
		lines := strings.Fields(out)
		if len(lines) < 2 || lines[0] != fmt.Sprint(aliceID) {
			t.Fatalf("%s: the command ran as uid %q, not alice's %d", ws, lines, aliceID)
		}
		// Inside, a group the namespace does not map shows as the
		// overflow gid; root's group 0 is mapped and would show.
		if slices.Contains(lines[1:], "0") {
			t.Errorf("%s: the command's groups are %q: want alice's, never root's", ws, lines[1:])
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(ws, "made.txt"), &st); err != nil {
			t.Fatalf("%s: %v", ws, err)
		}
		if st.Uid != aliceID {
			t.Errorf("%s: the committed file belongs to uid %d, not alice", ws, st.Uid)
		}
	}
	// Written straight, the shared group is what lets alice write bob's
	// shared directory: her groups are the command's on the host.
	rep, out, err := runAs(t, alice, Job{Argv: []string{"sh", "-c", "echo made > straight.txt"}, Workspace: filepath.Join(x.bob, "shared"), NoTransaction: true})
	if err != nil || rep.ExitCode != 0 {
		t.Errorf("alice's shared group did not reach the command: exit %d, err %v: %s", rep.ExitCode, err, out)
	}
	filepath.WalkDir(alice.Layout().State, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, _ := d.Info()
		if st := info.Sys().(*syscall.Stat_t); st.Uid != aliceID {
			t.Errorf("%s in alice's state belongs to uid %d", p, st.Uid)
		}
		return nil
	})
}

// TestCrossUserCredIndex: the Runner's cache of decoded credential scan
// indexes gives one caller's index to no other. Bob's index, settled
// and decoded for him, is in the cache; alice, scanning bob's home with
// bob's index and settings, reads nothing of it: the index is opened as
// her on every scan, and she may not open his (nor list his home), so
// she finds none of his stores. (That an entry is the uid's that read
// it, when both may read the file, is credstore's TestIndexCacheSettled.)
func TestCrossUserCredIndex(t *testing.T) {
	x := newCrossUser(t)
	t.Parallel()
	netrc := filepath.Join(x.bob, ".netrc")
	if err := os.WriteFile(netrc, []byte("machine m password p\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(netrc, bobID, bobID); err != nil {
		t.Fatal(err)
	}
	r := New(Config{})
	state := filepath.Join(x.bob, "state")
	cfg := credstore.ScanConfig{Home: x.bob, Covered: []string{state}, Index: filepath.Join(state, "credstores.index"), Cache: r.indexes}
	scanAs := func(id fsid.ID) credstore.Result {
		t.Helper()
		cfg.UID = id.UID
		var res credstore.Result
		var err error
		if aerr := fsid.Do(id, func() error { res, err = credstore.Scan(context.Background(), cfg); return nil }); aerr != nil || err != nil {
			t.Fatal(aerr, err)
		}
		return res
	}
	bob := fsid.ID{UID: bobID, GID: bobID, Groups: []int{bobID}, Umask: 0o022}
	alice := fsid.ID{UID: aliceID, GID: aliceID, Groups: []int{aliceID}, Umask: 0o022}
	// The home's directories settle, then the index written of them.
	time.Sleep(2100 * time.Millisecond)
	scanAs(bob)
	time.Sleep(2100 * time.Millisecond)
	if res := scanAs(bob); res.Reused == 0 || res.Read != 0 || len(res.Found) != 1 || res.Found[0].Path != netrc {
		t.Fatalf("bob's settled scan: found %v, read %d, reused %d; want his .netrc from his index", res.Found, res.Read, res.Reused)
	}
	if res := scanAs(alice); res.Reused != 0 || len(res.Found) != 0 {
		t.Fatalf("alice's scan of bob's home: found %v, reused %d of bob's index", res.Found, res.Reused)
	}
}

// TestCrossUserPolicyCache: the daemon's parsed policy files are each
// for the caller that read them. Bob's private policy, kept for him, is
// refused to alice; a policy both may read is read by each; one alice
// may no longer read is refused her though she read it before.
func TestCrossUserPolicyCache(t *testing.T) {
	x := newCrossUser(t)
	t.Parallel()
	shared := filepath.Join(x.bob, "pub", "policy.toml")
	if err := os.WriteFile(shared, []byte("[limits]\npids = 1234\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(shared, bobID, bobID); err != nil {
		t.Fatal(err)
	}
	r := New(Config{})
	load := func(uid int, path string) (policy.Policy, error) {
		t.Helper()
		id := fsid.ID{UID: uid, GID: uid, Groups: []int{uid}, Umask: 0o022}
		var p policy.Policy
		var err error
		if aerr := fsid.Do(id, func() error { p, err = r.policies.Load(uid, nil, path, true); return nil }); aerr != nil {
			t.Fatal(aerr)
		}
		return p, err
	}
	private := filepath.Join(x.bob, "policy.toml")
	// The files settle: what bob reads next is kept.
	time.Sleep(2100 * time.Millisecond)
	for range 2 {
		if p, err := load(bobID, private); err != nil || len(p.Filesystem.Writable) != 1 {
			t.Fatalf("bob's own policy: %+v, %v", p.Filesystem, err)
		}
	}
	if p, err := load(aliceID, private); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("alice loaded bob's private policy: %+v, %v", p.Filesystem, err)
	}
	for _, uid := range []int{bobID, aliceID, aliceID} {
		if p, err := load(uid, shared); err != nil || p.Limits.Pids != 1234 {
			t.Fatalf("uid %d: the shared policy: %d, %v", uid, p.Limits.Pids, err)
		}
	}
	if err := os.Chmod(shared, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(aliceID, shared); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("alice loaded a policy she may no longer read: %v", err)
	}
	if p, err := load(bobID, shared); err != nil || p.Limits.Pids != 1234 {
		t.Fatalf("bob's shared policy after the chmod: %d, %v", p.Limits.Pids, err)
	}
}
