package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testUser is the unprivileged account the root-run suite also runs as.
const testUser = "sandboxd-test"

var (
	binary   string // the built sandboxd
	baseDir  string // where every test's directories live (not under /tmp: the sandbox has its own /tmp)
	buildErr error
	// helperBinary is the lean helper built beside binary with the same
	// build stamp, as make build builds them: binary's runs start it.
	helperBinary string
	// frontBinary and runBinary are the lean front and the lean embedded
	// run, built beside binary with the same stamp, with binary linked
	// there as sandboxd-core: make build's layout. A test's `sandboxd
	// run` starts the front, as an installed sandboxd's does (the front,
	// then sandboxd-run or the daemon); every other command line, and a
	// run whose test names its binary, starts binary.
	frontBinary, runBinary string
	stamp                  string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Geteuid() == 0 {
		baseDir = "/var/lib/sandboxd-it"
	} else {
		cache, err := os.UserCacheDir()
		if err != nil {
			fmt.Fprintln(os.Stderr, "integration: no cache directory:", err)
			return 1
		}
		baseDir = filepath.Join(cache, "sandboxd-it")
	}
	if err := os.MkdirAll(baseDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	os.Chmod(baseDir, 0o755)
	run, err := os.MkdirTemp(baseDir, "run-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	os.Chmod(run, 0o755)
	baseDir = run
	defer os.RemoveAll(run)
	binary, helperBinary, stamp = filepath.Join(run, "sandboxd"), filepath.Join(run, "sandboxd-helper"), randHex(16)
	frontBinary, runBinary = filepath.Join(run, "sandboxd-front"), filepath.Join(run, "sandboxd-run")
	// The failpoints tag lets the crash tests name a commit failpoint
	// (SANDBOXD_TEST_CRASH_AT); a release build has none.
	if err := buildAll(map[string]string{binary: "../cmd/sandboxd", helperBinary: "../cmd/sandboxd-helper",
		runBinary: "../cmd/sandboxd-run", frontBinary: "../cmd/sandboxd-front"}); err != nil {
		fmt.Fprintln(os.Stderr, "integration: build:", err)
		return 1
	}
	if err := os.Link(binary, filepath.Join(run, "sandboxd-core")); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	return m.Run()
}

// buildAll builds each package into its output, side by side, stamped
// with the suite's stamp.
func buildAll(pkgs map[string]string) error {
	errs := make(chan error, len(pkgs))
	for out, pkg := range pkgs {
		go func() { errs <- buildStamped(out, pkg, stamp) }()
	}
	var err error
	for range pkgs {
		err = errors.Join(err, <-errs)
	}
	return err
}

// buildStamped builds pkg into out with the build stamp stamp ("": none),
// as make build does.
func buildStamped(out, pkg, stamp string) error {
	args := []string{"build", "-buildvcs=false", "-tags", "failpoints", "-o", out}
	if stamp != "" {
		ld := "-X github.com/sandboxd/sandboxd/sandbox/internal/wire.stamp=" + stamp
		if filepath.Base(pkg) == "sandboxd-front" {
			ld += " -X main.stamp=" + stamp // the front links no wire
		}
		args = append(args, "-ldflags", ld)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Stderr = os.Stderr
	cmd.Env = buildEnv(pkg)
	if err := cmd.Run(); err != nil {
		return err
	}
	return os.Chmod(out, 0o755)
}

// buildEnv is the environment pkg is built with, as make build builds
// it: the helper and the front static (CGO_ENABLED=0), the core with
// cgo (libseccomp).
func buildEnv(pkg string) []string {
	switch filepath.Base(pkg) {
	case "sandboxd-helper", "sandboxd-front":
		return append(os.Environ(), "CGO_ENABLED=0")
	}
	return os.Environ()
}

// identity is who runs sandboxd in a test.
type identity struct {
	name     string
	uid, gid int
}

func (id identity) root() bool { return id.uid == 0 }

// identities returns root and the unprivileged test user when the suite
// runs as root; otherwise just the current user. A root run without the
// test user fails: the unprivileged half of the suite must not be skipped
// silently.
func identities(t *testing.T) []identity {
	t.Helper()
	if os.Geteuid() != 0 {
		return []identity{{name: "user", uid: os.Getuid(), gid: os.Getgid()}}
	}
	u, err := user.Lookup(testUser)
	if err != nil {
		t.Fatalf("the unprivileged test user %q does not exist (run `make test`, which creates it): %v", testUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return []identity{{name: "root", uid: 0, gid: 0}, {name: "user", uid: uid, gid: gid}}
}

// env is one identity's private world: a home with canary secrets and a
// workspace, both owned by that identity.
type env struct {
	t      *testing.T
	id     identity
	dir    string // per-test directory, owned by root, 0755
	home   string
	ws     string
	canary string // a unique string stored in the secrets
	extra  []string
	// runArgs are flags every e.sh run gets (e.g. --no-transaction).
	runArgs []string
}

// forModes runs f once per identity in each workspace mode: "layer"
// (the default: writes held in a copy-on-write layer, persistence checked
// at commit) and "direct" (--no-transaction: persistence paths bound
// read-only during the run, new ones swept out after it).
func forModes(t *testing.T, f func(t *testing.T, e *env, layer bool)) {
	t.Helper()
	for _, mode := range []string{"layer", "direct"} {
		t.Run(mode, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				if mode == "direct" {
					e.runArgs = []string{"--no-transaction"}
				}
				f(t, e, mode == "layer")
			})
		})
	}
}

// forEach runs f once per identity, each with a fresh env.
func forEach(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			f(t, newEnv(t, id))
		})
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newEnvBare is an env with a workspace and no home yet.
func newEnvBare(t *testing.T, id identity) *env {
	t.Helper()
	dir, err := os.MkdirTemp(baseDir, strings.NewReplacer("/", "-").Replace(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { removeAll(dir) })
	e := &env{t: t, id: id, dir: dir, canary: "CANARY-" + randHex(8)}
	e.ws = e.mkdir("ws", 0o755)
	return e
}

func newEnv(t *testing.T, id identity) *env {
	t.Helper()
	e := newEnvBare(t, id)
	e.home = e.mkdir("home", 0o700)
	e.writeFile(filepath.Join(e.home, ".ssh", "id_rsa"), "-----BEGIN KEY-----\n"+e.canary+"\n", 0o600)
	e.writeFile(filepath.Join(e.home, ".aws", "credentials"), "[default]\naws_secret_access_key="+e.canary+"\n", 0o600)
	e.writeFile(filepath.Join(e.home, ".gitconfig"), "[user]\n\tname = Sandbox Test\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n", 0o644)
	return e
}

// removeAll removes a test tree even where the sandbox left read-only or
// immutable-looking modes behind.
func removeAll(dir string) {
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// mkdir creates dir/name owned by the env's identity.
func (e *env) mkdir(name string, mode os.FileMode) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.MkdirAll(p, mode); err != nil {
		e.t.Fatal(err)
	}
	os.Chmod(p, mode)
	e.chown(p)
	return p
}

func (e *env) chown(p string) {
	if os.Geteuid() == 0 {
		os.Lchown(p, e.id.uid, e.id.gid)
	}
}

// writeFile writes a file (and its parents) owned by the env's identity.
func (e *env) writeFile(p, content string, mode os.FileMode) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	for d := filepath.Dir(p); strings.HasPrefix(d, e.dir+"/"); d = filepath.Dir(d) {
		e.chown(d)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		e.t.Fatal(err)
	}
	os.Chmod(p, mode)
	e.chown(p)
}

// outside creates a file outside the workspace, owned by the env's
// identity (so only the sandbox, not file permissions, stands in the way).
func (e *env) outside(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.mkdir("outside", 0o755), name)
	e.writeFile(p, content, 0o644)
	return p
}

// result is one finished sandboxd run.
type result struct {
	stdout, stderr string
	code           int
	report         map[string]any
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// runOpts tune one run.
type runOpts struct {
	// killed: sandboxd is expected to die by a signal (crash tests).
	killed     bool
	stdin      string
	stdinFile  *os.File // sandboxd's stdin itself (a socket), instead of stdin
	extraFiles []*os.File
	env        []string      // added to the environment
	timeout    time.Duration // test-side guard (default 60s)
	noReport   bool
	dir        string // working directory (default the workspace)
	// tty, if set, is sandboxd's controlling terminal and stdin (and, with
	// ttyStdout, its stdout): a human reviewer's prompt appears there.
	tty       *os.File
	ttyStdout bool
	// ttyStderr makes tty sandboxd's stderr too.
	ttyStderr bool
	// ttyInherited makes tty only stdin, not the controlling terminal.
	ttyInherited bool
	// started, if set, is called with sandboxd's process once it runs
	// (to signal it), on a goroutine of its own.
	started func(p *os.Process)
	// bin is the sandboxd binary to run (default: frontBinary for a run,
	// else binary).
	bin string
}

// sandboxd runs the binary as the env's identity with HOME set to the
// env's home, in the workspace, and returns its output and report.
func (e *env) sandboxd(args ...string) result {
	e.t.Helper()
	return e.sandboxdOpts(runOpts{}, args...)
}

// sh runs `sandboxd run --report R -c script`.
func (e *env) sh(script string) result {
	e.t.Helper()
	return e.sandboxd(append(append([]string{"run"}, e.runArgs...), "-c", script)...)
}

func (e *env) sandboxdOpts(o runOpts, args ...string) result {
	e.t.Helper()
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	report := ""
	if len(args) > 0 && args[0] == "run" && !o.noReport {
		report = filepath.Join(e.mkdir("reports", 0o755), "report-"+randHex(4)+".json")
		args = append([]string{"run", "--report", report}, args[1:]...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	bin := binary
	if len(args) > 0 && args[0] == "run" {
		bin = frontBinary
	}
	if o.bin != "" {
		bin = o.bin
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = e.ws
	if o.dir != "" {
		cmd.Dir = o.dir
	}
	cmd.Env = append([]string{
		"HOME=" + e.home,
		"PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
		"USER=" + e.id.name,
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"GOPROXY=off",
		// No machine daemon takes a test's runs: a test names its own.
		"SANDBOXD_SOCKET=/run/sandboxd-tests/none.sock",
	}, o.env...)
	cmd.Stdin = strings.NewReader(o.stdin)
	if o.stdinFile != nil {
		cmd.Stdin = o.stdinFile
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.ExtraFiles = o.extraFiles
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 && e.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{
			Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
	}
	if o.tty != nil {
		cmd.Stdin = o.tty
		if o.ttyStdout {
			cmd.Stdout = o.tty
		}
		if o.ttyStderr {
			cmd.Stderr = o.tty
		}
		if !o.ttyInherited {
			cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
		}
	}
	err := cmd.Start()
	if err == nil {
		if o.started != nil {
			go o.started(cmd.Process)
		}
		err = cmd.Wait()
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && !o.killed {
			e.t.Fatalf("sandboxd itself was killed by %v\n%s", ws.Signal(), r)
		}
	default:
		e.t.Fatalf("sandboxd: %v\n%s", err, r)
	}
	if ctx.Err() != nil {
		e.t.Fatalf("sandboxd did not finish within %v\n%s", o.timeout, r)
	}
	if report != "" {
		b, err := os.ReadFile(report)
		if err != nil {
			e.t.Fatalf("no report: %v\n%s", err, r)
		}
		if err := json.Unmarshal(b, &r.report); err != nil {
			e.t.Fatalf("bad report: %v\n%s", err, b)
		}
	}
	return r
}

// mustRun fails the test unless the run exited 0.
func (r result) mustSucceed(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("expected success\n%s", r)
	}
	return r
}

// noCanary fails if s contains the env's canary.
func (e *env) noCanary(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.stdout, e.canary) || strings.Contains(r.stderr, e.canary) {
		t.Fatalf("the canary %s leaked\n%s", e.canary, r)
	}
}

// fileUnchanged records a file's content, mode, owner, times and xattrs
// and returns a check that fails if any of them changed.
func fileUnchanged(t *testing.T, p string) func() {
	t.Helper()
	before := snapshot(t, p)
	return func() {
		t.Helper()
		if after := snapshot(t, p); after != before {
			t.Fatalf("%s changed:\nbefore %s\nafter  %s", p, before, after)
		}
	}
}

func snapshot(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return "missing: " + err.Error()
	}
	content := ""
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		b, _ := os.ReadFile(p)
		content = string(b)
	}
	xattrs := make([]byte, 4096)
	n, _ := syscall.Listxattr(p, xattrs)
	return fmt.Sprintf("mode=%o uid=%d gid=%d size=%d mtime=%d.%d ctime=%d.%d xattrs=%q content=%q",
		st.Mode, st.Uid, st.Gid, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, xattrs[:max(n, 0)], content)
}

// listener is a host-side server that records what reaches it.
type listener struct {
	mu    sync.Mutex
	got   []byte
	conns int
	addr  string
	close func()
}

func (l *listener) received() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns, string(l.got)
}

// mustBeSilent fails if anything connected or arrived.
func (l *listener) mustBeSilent(t *testing.T) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	if n, got := l.received(); n != 0 || got != "" {
		t.Fatalf("host listener %s received %d connections and %q", l.addr, n, got)
	}
}

// tcpListener listens on the host's loopback.
func tcpListener(t *testing.T, network, addr string) *listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{addr: ln.Addr().String(), close: func() { ln.Close() }}
	t.Cleanup(l.close)
	go l.serve(ln)
	return l
}

// serve counts what ln accepts and records what each connection sends
// first, until ln is closed.
func (l *listener) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		l.conns++
		l.mu.Unlock()
		go func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4096)
			n, _ := c.Read(buf)
			l.mu.Lock()
			l.got = append(l.got, buf[:n]...)
			l.mu.Unlock()
		}()
	}
}

// udpListener records datagrams on the host's loopback.
func udpListener(t *testing.T) *listener {
	t.Helper()
	return packetListener(t, "udp", "127.0.0.1:0")
}

// packetListener records every datagram sent to a host socket.
func packetListener(t *testing.T, network, addr string) *listener {
	t.Helper()
	pc, err := net.ListenPacket(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{addr: pc.LocalAddr().String(), close: func() { pc.Close() }}
	t.Cleanup(l.close)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			l.mu.Lock()
			l.conns++
			l.got = append(l.got, buf[:n]...)
			l.mu.Unlock()
		}
	}()
	return l
}

// victim starts a host process that the sandbox must not affect, with a
// canary in its environment. It is killed at cleanup.
func victim(t *testing.T, canary string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Env = []string{"VICTIM_SECRET=" + canary}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// alive reports whether pid exists and is not a zombie or stopped.
func alive(pid int) (bool, string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, "gone"
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false, "unparsable"
	}
	state := s[i+2 : i+3]
	return state == "S" || state == "R" || state == "D", state
}

// processesWith lists host pids whose command line contains marker.
func processesWith(marker string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			out = append(out, pid)
		}
	}
	return out
}

// noSurvivors fails if any host process still carries marker.
func noSurvivors(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := processesWith(marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("processes of the command outlived it: %v", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cc compiles a small C program into the env's directory, readable by
// both identities.
func cc(t *testing.T, dir, name, src string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("gcc is required for this test: %v", err)
	}
	c := filepath.Join(dir, name+".c")
	bin := filepath.Join(dir, name)
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("gcc", "-O0", "-o", bin, c).CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	os.Chmod(bin, 0o755)
	return bin
}

var int80Once struct {
	sync.Once
	why string
}

// noInt80 says why this kernel cannot run i386 system calls (int 0x80),
// or "" when it can: a kernel without 32-bit emulation
// (CONFIG_IA32_EMULATION off, or ia32_emulation=0) faults on int 0x80
// itself, on the host, so there is nothing for the filter to stop.
func noInt80(t *testing.T) string {
	t.Helper()
	int80Once.Do(func() {
		dir, err := os.MkdirTemp(baseDir, "int80-probe-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		// i386 getpid is 20.
		bin := cc(t, dir, "probe", "int main(void) { long r; __asm__ volatile (\"int $0x80\" : \"=a\"(r) : \"a\"(20L) : \"memory\"); return r > 0 ? 0 : 1; }\n")
		err = exec.Command(bin).Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGSEGV {
				int80Once.why = "this kernel runs without 32-bit emulation: int 0x80 faults on the host itself"
				return
			}
		}
		if err != nil {
			t.Fatalf("the int 0x80 probe failed on the host: %v", err)
		}
	})
	return int80Once.why
}

// heavyBuilds admits one heavy toolchain run at a time (a Go build, vet
// or race test in a cold cache, a venv and its pip): each takes all the
// CPU there is, and the time limits of those runs were set for running
// one at a time. The parallel tests run beside it; the other heavy ones
// wait their turn before their sandboxd starts, which their time limit
// does not count.
var heavyBuilds = make(chan struct{}, 1)

// heavyBuild waits for the heavy slot and returns its release.
func heavyBuild() (release func()) {
	heavyBuilds <- struct{}{}
	return func() { <-heavyBuilds }
}

// reportString returns a top-level report field as a string.
func (r result) reportString(key string) string {
	v, _ := r.report[key].(string)
	return v
}
