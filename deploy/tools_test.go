package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tool is the path of a command the test needs, or a skip that says
// which Debian package has it (CI installs both: .ci/run, Makefile).
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (Debian package %s; CI installs it)", name, pkg)
	}
	return p
}

// command runs argv in dir with a plain environment: its combined
// output and error.
func command(t *testing.T, dir string, argv ...string) (string, error) {
	t.Helper()
	return commandEnv(dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8", "SYSTEMD_COLORS=0"}, argv...)
}

func commandEnv(dir string, env []string, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The alerts are valid rules, each alert's unit tests pass, and every
// expression names only sandboxd's metrics (and up, the scrape's own).
func TestAlerts(t *testing.T) {
	exprs := alertExprs(t)
	for name, e := range exprs {
		if _, err := checkExpr(e, map[string][]string{"up": nil}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, want := range []string{"SandboxdDown", "SandboxdReviewerFaults", "SandboxdLostDetections", "SandboxdBreakerTrips", "SandboxdQuestionsWaiting"} {
		if exprs[want] == "" {
			t.Errorf("alerts.yml has no alert %s", want)
		}
	}
	promtool := tool(t, "promtool", "prometheus")
	if out, err := command(t, ".", promtool, "check", "rules", "alerts.yml"); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := command(t, ".", promtool, "test", "rules", "alerts_test.yml"); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// alertExprs reads alerts.yml's alerts and their one-line expressions.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	alert := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if a, ok := strings.CutPrefix(line, "- alert: "); ok {
			alert = a
		}
		if e, ok := strings.CutPrefix(line, "expr: "); ok {
			if alert == "" || e == "" || e == "|" || e == ">" {
				t.Fatalf("alerts.yml: %q: each expr is one line, under its alert", line)
			}
			out[alert] = e
		}
	}
	return out
}

const socketPath = "/run/sandboxd/sandboxd.sock"

// unitKeys reads a unit file's Key=Value lines (the last of a key wins).
func unitKeys(t *testing.T, name string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	return keys
}

// The units agree with each other and the daemon: the socket unit
// listens where the service's daemon expects its socket, open to every
// user in a directory only root may write; systemd-analyze finds nothing
// to say about either (with ExecStart pointing at a binary built here:
// verify wants it to exist), and scores the service's exposure.
func TestSystemdUnits(t *testing.T) {
	sock, svc := unitKeys(t, "sandboxd.socket"), unitKeys(t, "sandboxd.service")
	for k, want := range map[string]string{"ListenStream": socketPath, "SocketMode": "0666", "DirectoryMode": "0755", "SocketUser": "root"} {
		if sock[k] != want {
			t.Errorf("sandboxd.socket: %s=%s, want %s", k, sock[k], want)
		}
	}
	const bin = "/usr/local/bin/sandboxd"
	if want := bin + " serve --socket " + socketPath; svc["ExecStart"] != want {
		t.Errorf("sandboxd.service: ExecStart=%s, want %s", svc["ExecStart"], want)
	}
	analyze := tool(t, "systemd-analyze", "systemd")
	dir := t.TempDir()
	built := filepath.Join(dir, "sandboxd")
	// The go command's own environment: its caches and toolchain.
	if out, err := commandEnv("..", os.Environ(), "go", "build", "-o", built, "./cmd/sandboxd"); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"sandboxd.socket", "sandboxd.service"} {
		b, _ := os.ReadFile(name)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(string(b), bin, built)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := command(t, dir, analyze, "verify", "sandboxd.socket", "sandboxd.service")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = command(t, dir, analyze, "security", "--offline=true", "sandboxd.service")
	score := regexp.MustCompile(`Overall exposure level for sandboxd\.service: ([0-9.]+)`).FindStringSubmatch(out)
	if err != nil || score == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	// Recorded in the README; not asserted: systemd's weights change
	// between versions.
	t.Logf("systemd-analyze security --offline=true: exposure %s", score[1])
	for _, line := range []string{"✓ NoNewPrivileges=", "✓ CapabilityBoundingSet=~CAP_SYS_MODULE", "✓ CapabilityBoundingSet=~CAP_SYS_PTRACE", "✓ CapabilityBoundingSet=~CAP_NET_ADMIN"} {
		if !strings.Contains(out, line) {
			t.Errorf("systemd-analyze security does not report %q", line)
		}
	}
}
