package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestPiUnit runs the pi package's own unit tests (node --test: the
// authorizer link, the daemon client against a fake daemon, the bash
// operations, the report's texts) with the Node pi needs, as root and as
// the unprivileged test user, from a copy each identity can read. The
// fake daemon's socket must be root's for the client to trust it, so
// only the unprivileged run may skip those cases; root runs them all.
func TestPiUnit(t *testing.T) {
	node := nodeForPi().binary(t)
	forEach(t, func(t *testing.T, e *env) {
		pkg := e.mkdir("pi-package", 0o755)
		files, err := filepath.Glob(filepath.Join("..", "adapters", "pi", "*", "*.ts"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no sources of the pi package: %v", err)
		}
		for _, f := range append(files, filepath.Join("..", "adapters", "pi", "package.json")) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(filepath.Join("..", "adapters", "pi"), f)
			e.writeFile(filepath.Join(pkg, rel), string(b), 0o644)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", "test/*.test.ts")
		cmd.Dir = pkg
		cmd.Env = []string{"PATH=" + filepath.Dir(node) + ":/usr/bin:/bin", "HOME=" + e.home, "TMPDIR=" + e.mkdir("tmp", 0o700), "LANG=C.UTF-8"}
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		if os.Geteuid() == 0 && !e.id.root() {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node --test failed (%v):\n%s", err, out)
		}
		count := func(what string) int {
			m := regexp.MustCompile(`(?m)^# ` + what + ` (\d+)$`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("node --test said no %q count:\n%s", what, out)
			}
			n, _ := strconv.Atoi(string(m[1]))
			return n
		}
		pass, fail, skipped := count("pass"), count("fail"), count("skipped")
		t.Logf("%s: %d passed, %d skipped in %s", e.id.name, pass, skipped, time.Since(start).Round(time.Millisecond))
		if fail != 0 || pass == 0 {
			t.Fatalf("%d failed, %d passed:\n%s", fail, pass, out)
		}
		if e.id.root() && skipped != 0 {
			t.Fatalf("as root no case may skip, %d did:\n%s", skipped, out)
		}
	})
}
