package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// frontLayout is make build's layout in a directory of the test's own:
// the lean front as sandboxd, built with frontStamp ("": unstamped),
// this suite's sandboxd as sandboxd-core and the helper beside them,
// both stamped with the suite's stamp. It returns the front's path.
func frontLayout(t *testing.T, frontStamp string) string {
	t.Helper()
	front := buildFrontOnce(t, frontStamp)
	dir, err := os.MkdirTemp(baseDir, "front-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	copyExecutable(t, front, filepath.Join(dir, "sandboxd"))
	copyExecutable(t, binary, filepath.Join(dir, "sandboxd-core"))
	copyExecutable(t, helperBinary, filepath.Join(dir, "sandboxd-helper"))
	return filepath.Join(dir, "sandboxd")
}

// buildFrontOnce builds the front with stamp, as make build does.
func buildFrontOnce(t *testing.T, stamp string) string {
	t.Helper()
	v, _ := built.LoadOrStore("front "+stamp, &builtBinary{})
	b := v.(*builtBinary)
	b.once.Do(func() {
		dir, err := os.MkdirTemp(baseDir, "build-")
		if err != nil {
			b.err = err
			return
		}
		os.Chmod(dir, 0o755)
		b.path = filepath.Join(dir, "sandboxd-front")
		args := []string{"build", "-buildvcs=false", "-o", b.path}
		if stamp != "" {
			args = append(args, "-ldflags", "-X main.stamp="+stamp)
		}
		cmd := exec.Command("go", append(args, "../cmd/sandboxd-front")...)
		cmd.Stderr = os.Stderr
		cmd.Env = buildEnv("../cmd/sandboxd-front")
		b.err = cmd.Run()
	})
	if b.err != nil {
		t.Fatalf("build the front: %v", b.err)
	}
	return b.path
}

// TestFrontSameAsCore: a run through the daemon prints, through the
// front, what the core prints through the daemon itself: the command's
// output, the denial's sentences, the exit status and the report (but
// its timing).
func TestFrontSameAsCore(t *testing.T) {
	t.Parallel()
	socket := startDaemon(t)
	front := frontLayout(t, stamp)
	forEach(t, func(t *testing.T, e *env) {
		vars := []string{"SANDBOXD_SOCKET=" + socket}
		args := []string{"run", "--daemon", "--reviewer", "off", "--", "sh", "-c", "echo out; echo err >&2; cat " + e.home + "/.ssh/id_rsa; touch /opt/x; exit 3"}
		core := e.sandboxdOpts(runOpts{env: vars}, args...)
		got := e.sandboxdOpts(runOpts{env: vars, bin: front}, args...)
		if core.code != 3 || got.code != core.code || got.stdout != core.stdout || got.stderr != core.stderr {
			t.Fatalf("the front's run differs from the core's\n--- core\n%s\n--- front\n%s", core, got)
		}
		if !strings.Contains(got.stderr, "sandboxd: denied") {
			t.Fatalf("no denial shown\n%s", got)
		}
		for _, r := range []map[string]any{core.report, got.report} {
			delete(r, "setup_ms")
		}
		if !reflect.DeepEqual(core.report, got.report) {
			t.Fatalf("the reports differ:\n%v\n%v", core.report, got.report)
		}
		// A daemon that is not there: the same failure, the same report.
		gone := []string{"SANDBOXD_SOCKET=" + filepath.Join(filepath.Dir(socket), "none.sock")}
		core = e.sandboxdOpts(runOpts{env: gone}, "run", "--daemon", "--", "true")
		got = e.sandboxdOpts(runOpts{env: gone, bin: front}, "run", "--daemon", "--", "true")
		if core.code != 125 || got.code != 125 || got.stderr != core.stderr || !reflect.DeepEqual(core.report, got.report) {
			t.Fatalf("the front's failure differs from the core's\n--- core\n%s\n%v\n--- front\n%s\n%v", core, core.report, got, got.report)
		}
	})
}

// TestFrontHandsOver: whatever the front does not take itself, the core
// does, in its place (the same pid: no child): an embedded run, another
// command, Claude Code's shell prefix by its name.
func TestFrontHandsOver(t *testing.T) {
	t.Parallel()
	front := frontLayout(t, stamp)
	forEach(t, func(t *testing.T, e *env) {
		none := []string{"SANDBOXD_SOCKET=" + filepath.Join(e.home, "no.sock")}
		r := e.sandboxdOpts(runOpts{env: none, bin: front}, "run", "-v", "--", "sh", "-c", "echo ran")
		r.mustSucceed(t)
		if !strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "separate=true") {
			t.Fatalf("the embedded run did not go through the core and its lean helper\n%s", r)
		}
		v := e.sandboxdOpts(runOpts{bin: front}, "version")
		v.mustSucceed(t)
		if !strings.HasPrefix(v.stdout, "sandboxd ") {
			t.Fatalf("version: %s", v)
		}
		shell := filepath.Join(filepath.Dir(front), "sandboxd-claude-code-shell")
		if err := os.Symlink("sandboxd", shell); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		s := e.sandboxdOpts(runOpts{bin: shell})
		if s.code != 125 || !strings.Contains(s.stderr, "Claude Code's shell prefix takes one script") {
			t.Fatalf("the shell prefix's name did not reach the core\n%s", s)
		}
	})
}

// TestFrontRefusesCore: a core of another build, one that others could
// change, or none, is not executed, and the front says why.
func TestFrontRefusesCore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stamp, want string
		change            func(t *testing.T, core string)
	}{
		{"another build", "0123456789abcdef0123456789abcdef", "are of different builds", nil},
		{"unstamped front", "", "are of different builds", nil},
		{"group-writable", stamp, "may be written by its group or others", func(t *testing.T, core string) { os.Chmod(core, 0o775) }},
		{"missing", stamp, "is missing", func(t *testing.T, core string) { os.Remove(core) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			front := frontLayout(t, tc.stamp)
			if tc.change != nil {
				tc.change(t, filepath.Join(filepath.Dir(front), "sandboxd-core"))
			}
			forEach(t, func(t *testing.T, e *env) {
				r := e.sandboxdOpts(runOpts{bin: front}, "version")
				if r.code != 125 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
					t.Fatalf("want exit 125 saying %q\n%s", tc.want, r)
				}
			})
		})
	}
}

// TestFrontOwnLinesPastTheFilter: on a terminal, a command that leaves
// an escape sequence unfinished on its stderr hides none of sandboxd's
// own lines through the daemon (the denial's sentences), as it hides
// none in an embedded run: the command's output passes the terminal
// filter, sandboxd's lines go past it.
func TestFrontOwnLinesPastTheFilter(t *testing.T) {
	t.Parallel()
	socket := startDaemon(t)
	front := frontLayout(t, stamp)
	forEach(t, func(t *testing.T, e *env) {
		for _, bin := range []string{front, binary} {
			master, slave := openPTY(t, e)
			var out strings.Builder
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					out.Write(buf[:max(n, 0)])
					if err != nil {
						return
					}
				}
			}()
			r := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}, bin: bin, tty: slave, ttyStderr: true},
				"run", "--daemon", "--reviewer", "off", "--", "sh", "-c", `printf '\033]0;' >&2; cat ~/.ssh/id_rsa; exit 3`)
			slave.Close()
			master.Close()
			<-done
			e.noCanary(t, r)
			if r.code != 3 || !strings.Contains(out.String(), "sandboxd: denied") || strings.Contains(out.String(), e.canary) {
				t.Fatalf("%s: the denial did not reach the terminal past the command's unfinished sequence (exit %d)\n--- terminal\n%q\n%s",
					filepath.Base(bin), r.code, out.String(), r)
			}
		}
	})
}

// TestFrontNamedInHooks: an agent's hook names the front (sandboxd)
// when the core is installed beside it, and the core itself when the
// front there fails the checks the front makes of the core (others may
// write it): the hook runs for every command of the agent.
func TestFrontNamedInHooks(t *testing.T) {
	t.Parallel()
	front := frontLayout(t, stamp)
	core := filepath.Join(filepath.Dir(front), "sandboxd-core")
	forEach(t, func(t *testing.T, e *env) {
		settings := filepath.Join(e.home, ".claude", "settings.json")
		for _, tc := range []struct {
			name, mode string
			want       string
		}{
			{"front checked", "0755", front},
			{"front group-writable", "0775", core},
		} {
			if out, err := exec.Command("chmod", tc.mode, front).CombinedOutput(); err != nil {
				t.Fatalf("chmod: %v %s", err, out)
			}
			os.Remove(settings)
			e.sandboxdOpts(runOpts{bin: core}, "hook", "install", "claude-code").mustSucceed(t)
			b, err := os.ReadFile(settings)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"`+tc.want+` hook`) {
				t.Fatalf("%s: the hook does not name %s:\n%s", tc.name, tc.want, b)
			}
			e.sandboxdOpts(runOpts{bin: core}, "hook", "uninstall", "claude-code").mustSucceed(t)
		}
	})
}
