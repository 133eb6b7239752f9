package integration

import (
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	crand "crypto/rand"
)

// TestProcNoSurvivors: whatever the command leaves running in the
// background — a new session, a nohup'd job, a double-forked orphan, a
// daemon that closed its descriptors, a job that ignores SIGTERM/SIGHUP —
// is gone once sandboxd returns, and sandboxd returns once the foreground
// command has ended (the test-side guard is far below the sleeps).
func TestProcNoSurvivors(t *testing.T) {
	// Serial: it looks for the command's processes host-wide, with a deadline.
	cases := []struct {
		name   string
		script func(arg string) string
		want   int // processes running `sleep arg` before the command ends
	}{
		{"setsid", func(a string) string { return "setsid sleep " + a + " &" }, 1},
		{"nohup", func(a string) string { return "nohup sleep " + a + " >/dev/null 2>&1 &" }, 1},
		{"nohup-holding-stdout", func(a string) string { return "nohup sleep " + a + " &" }, 1},
		{"background-holding-stdout", func(a string) string { return "sleep " + a + " &" }, 1},
		{"double-fork", func(a string) string { return "( (sleep " + a + " &) & )" }, 1},
		{"daemon-closing-fds", func(a string) string {
			return `python3 -c '
import os, sys
if os.fork(): sys.exit(0)
os.setsid()
if os.fork(): os._exit(0)
os.closerange(0, 65536)
os.execvp("sleep", ["sleep", "` + a + `"])
'`
		}, 1},
		{"ignores-term-and-hup", func(a string) string {
			return "( trap '' TERM HUP INT; exec sleep " + a + " ) &"
		}, 1},
		{"several", func(a string) string {
			return "setsid sleep " + a + " & nohup sleep " + a + " >/dev/null 2>&1 & ( (sleep " + a + " &) & )"
		}, 3},
	}
	forEach(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				arg := sleepArg(1000)
				script := c.script(arg) + "\n" + waitForSleeps(arg, c.want) + "\necho foreground-done"
				r := e.sandboxdOpts(runOpts{timeout: 60 * time.Second}, "run", "-c", script)
				if r.code != 0 {
					t.Fatalf("expected exit 0\n%s", r)
				}
				if !strings.Contains(r.stdout, fmt.Sprintf("running=%d\n", c.want)) || !strings.Contains(r.stdout, "foreground-done") {
					t.Fatalf("the background processes were not seen running inside before the command ended\n%s", r)
				}
				noSurvivors(t, arg)
			})
		}
	})
}

// TestProcTimeout: --timeout ends the command and everything it started
// with exit 124, even when the command ignores SIGTERM.
func TestProcTimeout(t *testing.T) {
	// Serial: it measures --timeout and looks for survivors host-wide, with a deadline.
	forEach(t, func(t *testing.T, e *env) {
		cases := []struct {
			name   string
			script func(arg string) string
		}{
			{"plain", func(a string) string { return "touch started; sleep " + a + "; touch finished" }},
			{"ignores-term", func(a string) string {
				return `trap "" TERM; touch started; sleep ` + a + "; touch finished"
			}},
			{"children-ignore-term", func(a string) string {
				return `trap "" TERM; (sleep ` + a + ` &); setsid sleep ` + a + ` & touch started; sleep ` + a + "; touch finished"
			}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				arg := sleepArg(300)
				os.Remove(filepath.Join(e.ws, "started"))
				os.Remove(filepath.Join(e.ws, "finished"))
				r := e.sandboxdOpts(runOpts{timeout: 60 * time.Second}, "run", "--timeout", "1s", "-c", c.script(arg))
				if r.code != 124 {
					t.Fatalf("expected exit 124\n%s", r)
				}
				if r.report["timed_out"] != true {
					t.Fatalf("report timed_out: %v\n%s", r.report["timed_out"], r)
				}
				if code, _ := r.report["exit_code"].(float64); code != 124 {
					t.Fatalf("report exit_code: %v", r.report["exit_code"])
				}
				if _, err := os.Stat(filepath.Join(e.ws, "started")); err != nil {
					t.Fatalf("the command never started: %v\n%s", err, r)
				}
				if _, err := os.Stat(filepath.Join(e.ws, "finished")); err == nil {
					t.Fatalf("the command ran to completion despite the timeout\n%s", r)
				}
				noSurvivors(t, arg)
			})
		}
	})
}

// TestProcForkBomb: a fork bomb under `[limits] pids = 64` is bounded
// inside, leaves nothing behind and does not starve the host.
func TestProcForkBomb(t *testing.T) {
	// Serial: a fork bomb under --timeout, then survivors host-wide, with a deadline.
	forEach(t, func(t *testing.T, e *env) {
		pol := writePolicy(t, e, "policy.toml", "[limits]\npids = 64\n")

		t.Run("counted", func(t *testing.T) {
			arg := sleepArg(30)
			// Fork until refused, each child exec'ing sleep; count the
			// successes and the processes visible in the sandbox's /proc.
			script := `python3 -c '
import os, sys
ok = fail = 0
for i in range(500):
    try:
        pid = os.fork()
    except OSError:
        fail += 1
        continue
    if pid == 0:
        try:
            os.execvp("sleep", ["sleep", "` + arg + `"])
        finally:
            os._exit(127)
    ok += 1
procs = len([d for d in os.listdir("/proc") if d.isdigit()])
print("spawned=%d failed=%d procs=%d" % (ok, fail, procs), flush=True)
'`
			r := e.sandboxdOpts(runOpts{timeout: 90 * time.Second}, "run", "--policy", pol, "--timeout", "20s", "-c", script)
			if r.code != 0 {
				t.Fatalf("expected exit 0\n%s", r)
			}
			m := regexp.MustCompile(`spawned=(\d+) failed=(\d+) procs=(\d+)`).FindStringSubmatch(r.stdout)
			if m == nil {
				t.Fatalf("no count printed\n%s", r)
			}
			spawned, _ := strconv.Atoi(m[1])
			failed, _ := strconv.Atoi(m[2])
			procs, _ := strconv.Atoi(m[3])
			t.Logf("inside: %s", m[0])
			if spawned > 64 || spawned < 1 {
				t.Fatalf("spawned %d processes under pids = 64\n%s", spawned, r)
			}
			if failed == 0 {
				t.Fatalf("no fork was refused under pids = 64\n%s", r)
			}
			// The sandbox's /proc shows the helper (pid 1) besides the
			// command's processes.
			if procs > 64+1 {
				t.Fatalf("%d processes visible inside under pids = 64\n%s", procs, r)
			}
			noSurvivors(t, arg)
			hostCanFork(t, e)
		})

		t.Run("bash-loop", func(t *testing.T) {
			arg := sleepArg(30)
			script := "for i in $(seq 500); do sleep " + arg + " & done 2>/dev/null; wait"
			r := e.sandboxdOpts(runOpts{timeout: 90 * time.Second}, "run", "--policy", pol, "--timeout", "5s", "-c", script)
			// Either bash gave up on fork and the loop ended, or the
			// timeout ended it.
			if r.code == 125 {
				t.Fatalf("sandboxd failed\n%s", r)
			}
			noSurvivors(t, arg)
			hostCanFork(t, e)
		})

		t.Run("classic", func(t *testing.T) {
			marker := "bomb-" + randHex(6)
			script := ": " + marker + "; bomb() { bomb | bomb & }; bomb; sleep 3; echo bombed"
			r := e.sandboxdOpts(runOpts{timeout: 90 * time.Second}, "run", "--policy", pol, "--timeout", "5s", "-c", script)
			if r.code == 125 {
				t.Fatalf("sandboxd failed\n%s", r)
			}
			noSurvivors(t, marker)
			hostCanFork(t, e)
		})
	})
}

// TestProcExitStatus: sandboxd exits with the command's status, 128+N for
// a signal, 126/127 for a command that cannot be run, and the report
// agrees.
func TestProcExitStatus(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		t.Run("exit-3", func(t *testing.T) {
			r := e.sh("echo before > before; exit 3; echo after > after")
			wantCode(t, r, 3)
			mustExist(t, filepath.Join(e.ws, "before"), r)
			mustNotExist(t, filepath.Join(e.ws, "after"), r)
		})
		t.Run("sigterm-self", func(t *testing.T) {
			r := e.sh("echo before > killed-before; kill -TERM $$; echo after > killed-after")
			wantCode(t, r, 143)
			mustExist(t, filepath.Join(e.ws, "killed-before"), r)
			mustNotExist(t, filepath.Join(e.ws, "killed-after"), r)
			if sig, _ := r.report["signal"].(float64); sig != 15 {
				t.Fatalf("report signal: %v\n%s", r.report["signal"], r)
			}
		})
		t.Run("not-found", func(t *testing.T) {
			r := e.sandboxd("run", "--", "/nonexistent-"+randHex(4))
			wantCode(t, r, 127)
			if !strings.Contains(r.stderr, "/nonexistent-") {
				t.Fatalf("stderr does not name the missing command\n%s", r)
			}
		})
		t.Run("not-found-in-path", func(t *testing.T) {
			name := "no-such-command-" + randHex(4)
			r := e.sandboxd("run", "--", name)
			wantCode(t, r, 127)
			if !strings.Contains(r.stderr, name) {
				t.Fatalf("stderr does not name the missing command\n%s", r)
			}
		})
		t.Run("not-executable", func(t *testing.T) {
			ran := filepath.Join(e.ws, "script-ran")
			e.writeFile(filepath.Join(e.ws, "file"), "#!/bin/sh\ntouch "+ran+"\n", 0o644)
			r := e.sandboxd("run", "--", "./file")
			wantCode(t, r, 126)
			if !strings.Contains(r.stderr, "file") {
				t.Fatalf("stderr does not name the file\n%s", r)
			}
			mustNotExist(t, ran, r)
		})
		t.Run("directory", func(t *testing.T) {
			e.mkdir("ws/adir", 0o755)
			r := e.sandboxd("run", "--", "./adir")
			wantCode(t, r, 126)
		})
		t.Run("true", func(t *testing.T) {
			r := e.sandboxd("run", "--", "true")
			wantCode(t, r, 0)
			r = e.sandboxd("run", "--", "touch", "made-by-argv")
			wantCode(t, r, 0)
			mustExist(t, filepath.Join(e.ws, "made-by-argv"), r)
		})
	})
}

// TestProcFirstRunFreshWorkspace: the first run in a workspace sandboxd has
// never seen, by a caller without sandboxd state yet (so neither its state
// directory nor the workspace's private cache directory exists), succeeds,
// every time.
func TestProcFirstRunFreshWorkspace(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		for i := 0; i < 20; i++ {
			ws := e.mkdir(fmt.Sprintf("fresh-%02d", i), 0o755)
			home := e.mkdir(fmt.Sprintf("fresh-home-%02d", i), 0o700)
			r := e.sandboxdOpts(runOpts{dir: ws, env: []string{"HOME=" + home}}, "run", "-c", "echo first > first-run")
			if r.code != 0 {
				t.Fatalf("first run in fresh workspace %d failed\n%s", i, r)
			}
			b, err := os.ReadFile(filepath.Join(ws, "first-run"))
			if err != nil || string(b) != "first\n" {
				t.Fatalf("first run in fresh workspace %d: %q %v\n%s", i, b, err, r)
			}
		}
	})
}

// TestCLIBadInput: every kind of bad input exits 125 with one line on
// stderr, and the command never runs.
func TestCLIBadInput(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		token := "RAN-" + randHex(6)
		marker := filepath.Join(e.ws, "marker-"+randHex(4))
		cmd := "echo " + token + "; touch " + marker
		link := filepath.Join(e.dir, "etc-link")
		if err := os.Symlink("/etc", link); err != nil {
			t.Fatal(err)
		}
		e.chown(link)
		badTOML := writePolicy(t, e, "bad-syntax.toml", "[limits]\npids = 64 64\n")
		unknownKey := writePolicy(t, e, "unknown-key.toml", "[limits]\npids = 64\nforks_per_second = 5\n")

		cases := []struct {
			name     string
			args     []string
			stderrRE string // extra check on the line, optional
		}{
			{"unknown-flag", []string{"run", "--no-such-flag", "-c", cmd}, "no-such-flag"},
			{"no-command", []string{"run"}, ""},
			{"c-and-argv", []string{"run", "-c", cmd, "--", "sh", "-c", cmd}, ""},
			{"missing-workspace", []string{"run", "--workspace", filepath.Join(e.dir, "missing"), "-c", cmd}, "missing"},
			{"workspace-root", []string{"run", "--workspace", "/", "-c", cmd}, ""},
			{"workspace-home", []string{"run", "--workspace", e.home, "-c", cmd}, ""},
			{"workspace-etc", []string{"run", "--workspace", "/etc", "-c", cmd}, "/etc"},
			{"workspace-usr-lib", []string{"run", "--workspace", "/usr/lib", "-c", cmd}, "/usr/lib"},
			{"workspace-symlink-to-etc", []string{"run", "--workspace", link, "-c", cmd}, "/etc"},
			{"missing-policy", []string{"run", "--policy", filepath.Join(e.dir, "no-such-policy.toml"), "-c", cmd}, "no-such-policy.toml"},
			{"invalid-toml", []string{"run", "--policy", badTOML, "-c", cmd}, regexp.QuoteMeta(badTOML) + `:2\b`},
			{"unknown-key", []string{"run", "--policy", unknownKey, "-c", cmd}, regexp.QuoteMeta(unknownKey) + `:3\b.*forks_per_second`},
			{"bad-timeout", []string{"run", "--timeout", "soon", "-c", cmd}, ""},
			{"negative-timeout", []string{"run", "--timeout", "-1s", "-c", cmd}, ""},
			{"bad-reviewer", []string{"run", "--reviewer", "nobody", "-c", cmd}, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.sandboxdOpts(runOpts{noReport: true}, c.args...)
				badInput(t, r, token, marker)
				if c.stderrRE != "" && !regexp.MustCompile(c.stderrRE).MatchString(r.stderr) {
					t.Fatalf("stderr does not match %q\n%s", c.stderrRE, r)
				}
			})
		}

		t.Run("unknown-subcommand", func(t *testing.T) {
			r := e.sandboxdOpts(runOpts{noReport: true}, "runn", "-c", cmd)
			if r.code != 2 || !strings.HasPrefix(r.stderr, "sandboxd: unknown command \"runn\"\n") || !strings.Contains(r.stderr, "\nUsage:\n") {
				t.Fatalf("expected exit 2 (a usage error), a line naming the command and the usage\n%s", r)
			}
			if strings.Contains(r.stdout, token) {
				t.Fatalf("the command ran\n%s", r)
			}
			mustNotExist(t, marker, r)
		})
		t.Run("workspace-policy-loosens", func(t *testing.T) {
			ws := e.mkdir("loose-ws", 0o755)
			e.writeFile(filepath.Join(ws, ".sandboxd.toml"), "[limits]\npids = 999999\n", 0o644)
			m := filepath.Join(ws, "marker")
			r := e.sandboxdOpts(runOpts{noReport: true, dir: ws}, "run", "-c", "echo "+token+"; touch "+m)
			badInput(t, r, token, m)
			if !strings.Contains(r.stderr, "pids") {
				t.Fatalf("stderr does not name the key\n%s", r)
			}
		})
		t.Run("workspace-policy-loosens-isolation", func(t *testing.T) {
			ws := e.mkdir("loose-ws2", 0o755)
			e.writeFile(filepath.Join(ws, ".sandboxd.toml"), "isolation = \"landlock-only\"\n", 0o644)
			m := filepath.Join(ws, "marker")
			r := e.sandboxdOpts(runOpts{noReport: true, dir: ws}, "run", "-c", "echo "+token+"; touch "+m)
			badInput(t, r, token, m)
		})
		t.Run("workspace-policy-tightens", func(t *testing.T) {
			// Control: a workspace policy that only tightens is accepted.
			ws := e.mkdir("tight-ws", 0o755)
			e.writeFile(filepath.Join(ws, ".sandboxd.toml"), "[limits]\npids = 128\n", 0o644)
			r := e.sandboxdOpts(runOpts{dir: ws}, "run", "-c", "touch made")
			wantCode(t, r, 0)
			mustExist(t, filepath.Join(ws, "made"), r)
		})
	})
}

// TestProcEnvScrub: secrets in the caller's environment do not reach the
// command; harmless variables do; [env] allow lets one through.
func TestProcEnvScrub(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		canary := "CANARY-" + randHex(8)
		vars := []string{
			"OPENAI_API_KEY=" + canary + "-openai",
			"GITHUB_TOKEN=" + canary + "-github",
			"AWS_SECRET_ACCESS_KEY=" + canary + "-aws",
			"SSH_AUTH_SOCK=/x/" + canary + "-ssh",
			"MY_PASSWORD=" + canary + "-password",
			"ANTHROPIC_API_KEY=" + canary + "-anthropic",
			// Credentials by value, under names no deny pattern knows.
			"DATABASE_URL=postgres://app:" + canary + "-dburl@db.internal/app",
			"RSYNC_PROXY=ru:" + canary + "-rsync@proxy.internal:873",
			"PLAIN_URL=postgres://db.internal/app",
			"FOO=bar",
		}
		t.Run("default", func(t *testing.T) {
			r := e.sandboxdOpts(runOpts{env: vars}, "run", "-c", "env; cat /proc/self/environ | tr '\\0' '\\n'")
			wantCode(t, r, 0)
			if !hasLine(r.stdout, "FOO=bar") || !hasLine(r.stdout, "PLAIN_URL=postgres://db.internal/app") {
				t.Fatalf("FOO=bar or PLAIN_URL did not reach the command\n%s", r)
			}
			if strings.Contains(r.stdout, canary) || strings.Contains(r.stderr, canary) {
				t.Fatalf("a secret variable reached the command\n%s", r)
			}
			for _, k := range []string{"OPENAI_API_KEY=", "GITHUB_TOKEN=", "AWS_SECRET_ACCESS_KEY=", "SSH_AUTH_SOCK=", "MY_PASSWORD=", "DATABASE_URL=", "RSYNC_PROXY="} {
				if strings.Contains(r.stdout, k) {
					t.Fatalf("%s reached the command\n%s", k, r)
				}
			}
		})
		t.Run("allow", func(t *testing.T) {
			pol := writePolicy(t, e, "env-allow.toml", "[env]\nallow = [\"GITHUB_TOKEN\", \"DATABASE_URL\"]\n")
			r := e.sandboxdOpts(runOpts{env: vars}, "run", "--policy", pol, "-c", "env")
			wantCode(t, r, 0)
			if !hasLine(r.stdout, "GITHUB_TOKEN="+canary+"-github") || !hasLine(r.stdout, "FOO=bar") ||
				!hasLine(r.stdout, "DATABASE_URL=postgres://app:"+canary+"-dburl@db.internal/app") {
				t.Fatalf("the allowed GITHUB_TOKEN or DATABASE_URL (or FOO) did not reach the command\n%s", r)
			}
			for _, s := range []string{"-openai", "-aws", "-ssh", "-password", "-anthropic", "-rsync"} {
				if strings.Contains(r.stdout, canary+s) {
					t.Fatalf("%s leaked although only GITHUB_TOKEN is allowed\n%s", s, r)
				}
			}
		})
	})
}

// TestProcPrivileges: the command has no capabilities, no_new_privs,
// a seccomp filter, no core dumps, only the standard descriptors, and the
// expected identity.
func TestProcPrivileges(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		// Descriptors beyond 0-2 given to sandboxd must not reach the command.
		extra, err := os.Open(e.home)
		if err != nil {
			t.Fatal(err)
		}
		defer extra.Close()
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		defer pw.Close()
		script := `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
echo "core=$(ulimit -c)"
echo "fds-begin"; ls -l /proc/self/fd | awk 'NR>1 {print $9, $11}'; echo "fds-end"
echo "uid=$(id -u)"
echo owned > owned-file`
		r := e.sandboxdOpts(runOpts{extraFiles: []*os.File{extra, pw}}, "run", "-c", script)
		wantCode(t, r, 0)
		for _, want := range []string{
			"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
			"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2",
			"core=0",
		} {
			if !hasLine(r.stdout, want) {
				t.Fatalf("missing %q\n%s", want, r)
			}
		}
		// Exactly 0, 1, 2 and the directory ls itself opened to list
		// /proc/self/fd.
		block := between(r.stdout, "fds-begin\n", "fds-end\n")
		var fds []string
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			f := strings.Fields(line)
			if len(f) < 1 {
				continue
			}
			if len(f) == 2 && regexp.MustCompile(`^/proc/\d+/fd$`).MatchString(f[1]) && f[0] != "0" && f[0] != "1" && f[0] != "2" {
				fds = append(fds, "ls-dir")
				continue
			}
			fds = append(fds, f[0])
		}
		sort.Strings(fds)
		if strings.Join(fds, " ") != "0 1 2 ls-dir" {
			t.Fatalf("open descriptors inside: %v (want exactly 0 1 2 and ls's own directory)\n%s", fds, r)
		}
		wantUID := e.id.uid
		if !hasLine(r.stdout, fmt.Sprintf("uid=%d", wantUID)) {
			t.Fatalf("id -u inside: want %d\n%s", wantUID, r)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(e.ws, "owned-file"), &st); err != nil {
			t.Fatalf("file written inside: %v\n%s", err, r)
		}
		if int(st.Uid) != e.id.uid {
			t.Fatalf("a file created in the workspace is owned by uid %d on the host, want %d", st.Uid, e.id.uid)
		}
	})
}

// TestProcHelperThreads: every thread of the helper, which stays beside
// the command as its pid 1, is confined as the command is: no
// capabilities in its permitted, effective, inheritable or ambient sets,
// no_new_privs and the seccomp filter; and the thread that forked the
// command (the helper's main thread, whose credentials an exec would
// start from) has an empty bounding set. (The other threads keep theirs:
// they never exec, and without permitted capabilities it grants
// nothing. Landlock leaves no mark in /proc: the command's own denials
// are tested by the escape suite.)
func TestProcHelperThreads(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		script := `for f in /proc/$PPID/task/*/status; do
  grep -E '^(Pid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "$f" | tr '\t\n' '= '; echo
done; echo "helper=$PPID"`
		r := e.sandboxd("run", "-c", script)
		wantCode(t, r, 0)
		helper := ""
		var tasks []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if h, ok := strings.CutPrefix(line, "helper="); ok {
				helper = h
				continue
			}
			tasks = append(tasks, line)
		}
		// The runtime's own, the control socket's, the signals' and the
		// spare ones the helper reserves before the limits apply.
		if helper == "" || len(tasks) < 2 {
			t.Fatalf("the helper's threads were not listed\n%s", r)
		}
		main := false
		for _, task := range tasks {
			for _, want := range []string{"CapInh:=0000000000000000 ", "CapPrm:=0000000000000000 ",
				"CapEff:=0000000000000000 ", "CapAmb:=0000000000000000 ", "NoNewPrivs:=1 ", "Seccomp:=2 "} {
				if !strings.Contains(task, want) {
					t.Errorf("a thread of the helper lacks %q: %s", want, task)
				}
			}
			if strings.HasPrefix(task, "Pid:="+helper+" ") {
				main = true
				if !strings.Contains(task, "CapBnd:=0000000000000000 ") {
					t.Errorf("the helper's main thread keeps a bounding set: %s", task)
				}
			}
		}
		if !main {
			t.Errorf("the helper's main thread (%s) was not among its threads\n%s", helper, r)
		}
	})
}

// TestProcPositiveControls: ordinary development work succeeds inside.
func TestProcPositiveControls(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		t.Run("python", func(t *testing.T) {
			r := e.sh("python3 -c 'print(6*7)' > answer; cat answer")
			wantCode(t, r, 0)
			if strings.TrimSpace(r.stdout) != "42" {
				t.Fatalf("python3 printed %q\n%s", r.stdout, r)
			}
			b, _ := os.ReadFile(filepath.Join(e.ws, "answer"))
			if string(b) != "42\n" {
				t.Fatalf("answer file: %q", b)
			}
		})
		t.Run("loopback-echo", func(t *testing.T) {
			msg := "ping-" + randHex(6)
			r := e.sh(`python3 -c '
import socket, threading
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
def serve():
    c, _ = s.accept()
    c.sendall(b"echo:" + c.recv(100))
    c.close()
t = threading.Thread(target=serve)
t.start()
c = socket.create_connection(s.getsockname(), timeout=10)
c.sendall(b"` + msg + `")
print(c.recv(100).decode())
t.join()
'`)
			wantCode(t, r, 0)
			if strings.TrimSpace(r.stdout) != "echo:"+msg {
				t.Fatalf("loopback echo: %q\n%s", r.stdout, r)
			}
		})
		t.Run("go-build-twice", func(t *testing.T) {
			defer heavyBuild()() // the first build is in a cold cache
			word := "built-" + randHex(4)
			e.writeFile(filepath.Join(e.ws, "go.mod"), "module example.com/app\n\ngo 1.21\n", 0o644)
			e.writeFile(filepath.Join(e.ws, "main.go"), "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\""+word+"\") }\n", 0o644)
			hostCache := filepath.Join(e.home, ".cache")
			r1 := e.sandboxdOpts(runOpts{timeout: 5 * time.Minute}, "run", "-c", "go build -o app . && ./app")
			wantCode(t, r1, 0)
			if strings.TrimSpace(r1.stdout) != word {
				t.Fatalf("first build printed %q\n%s", r1.stdout, r1)
			}
			caches, _ := filepath.Glob(filepath.Join(e.home, ".local", "state", "sandboxd", "cache", "*", "go-build"))
			if len(caches) != 1 {
				t.Fatalf("sandbox-private GOCACHE: found %v", caches)
			}
			if n := countFiles(caches[0]); n == 0 {
				t.Fatalf("the sandbox-private GOCACHE %s is empty after a build", caches[0])
			}
			r2 := e.sandboxdOpts(runOpts{timeout: 5 * time.Minute}, "run", "-c", "go build -x -o app . 2>build.log && ./app; cat build.log >&2")
			wantCode(t, r2, 0)
			if strings.TrimSpace(r2.stdout) != word {
				t.Fatalf("second build printed %q\n%s", r2.stdout, r2)
			}
			if !strings.Contains(r2.stderr, "WORK=") {
				t.Fatalf("no go build -x output\n%s", r2)
			}
			for _, line := range strings.Split(r2.stderr, "\n") {
				if strings.Contains(line, "/compile") && strings.Contains(line, "-p main") {
					t.Fatalf("the second build compiled the main package again (cache not reused):\n%s", line)
				}
			}
			if _, err := os.Stat(hostCache); err == nil {
				t.Fatalf("the host's own cache %s was written", hostCache)
			}
		})
	})
}

// TestProcLandlockOnly: isolation = "landlock-only" runs an unprivileged
// caller's command without namespaces but still confined, and is refused
// for root and with --require-isolation.
func TestProcLandlockOnly(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		pol := writePolicy(t, e, "landlock-only.toml", "isolation = \"landlock-only\"\n")
		token := "RAN-" + randHex(6)
		target := e.outside("victim.txt", "original\n")
		check := fileUnchanged(t, target)
		ln := tcpListener(t, "tcp", "127.0.0.1:0")
		_, port, _ := strings.Cut(ln.addr, ":")
		script := `echo ` + token + `
echo inside > inside.txt
echo evil > ` + target + ` && echo wrote-outside
python3 -c '
import socket
try:
    c = socket.create_connection(("127.0.0.1", ` + port + `), timeout=5)
    c.sendall(b"leak")
    c.close()
    print("connected")
except OSError as e:
    print("connect refused:", e)
'`
		t.Run("run", func(t *testing.T) {
			r := e.sandboxd("run", "--policy", pol, "-c", script)
			if e.id.root() {
				wantCode(t, r, 125)
				if strings.Contains(r.stdout, token) {
					t.Fatalf("the command ran as root without a user namespace\n%s", r)
				}
				mustNotExist(t, filepath.Join(e.ws, "inside.txt"), r)
				if !strings.HasPrefix(r.stderr, "sandboxd:") {
					t.Fatalf("stderr: %q", r.stderr)
				}
				check()
				ln.mustBeSilent(t)
				return
			}
			wantCode(t, r, 0)
			if !strings.Contains(r.stdout, token) {
				t.Fatalf("the command did not run\n%s", r)
			}
			if r.reportString("isolation") != "landlock-only" || r.reportString("network_mode") != "landlock" {
				t.Fatalf("report isolation %q network_mode %q\n%s", r.reportString("isolation"), r.reportString("network_mode"), r)
			}
			// No mount namespace, no layer: the report says so.
			if txn := txnOf(t, r); txn["mode"] != "none" || !strings.Contains(fmt.Sprint(txn["why"]), "mount namespace") {
				t.Fatalf("transaction %v\n%s", txn, r)
			}
			if !strings.Contains(strings.ToLower(r.stderr), "warning") {
				t.Fatalf("no warning on stderr\n%s", r)
			}
			b, err := os.ReadFile(filepath.Join(e.ws, "inside.txt"))
			if err != nil || string(b) != "inside\n" {
				t.Fatalf("write inside the workspace: %q %v\n%s", b, err, r)
			}
			check()
			if strings.Contains(r.stdout, "wrote-outside") || strings.Contains(r.stdout, "connected") {
				t.Fatalf("the command escaped\n%s", r)
			}
			ln.mustBeSilent(t)
		})
		t.Run("require-isolation", func(t *testing.T) {
			r := e.sandboxd("run", "--policy", pol, "--require-isolation", "-c", script)
			wantCode(t, r, 125)
			if strings.Contains(r.stdout, token) {
				t.Fatalf("the command ran although --require-isolation conflicts with isolation = \"landlock-only\"\n%s", r)
			}
			if !strings.HasPrefix(r.stderr, "sandboxd:") {
				t.Fatalf("stderr: %q", r.stderr)
			}
			check()
			ln.mustBeSilent(t)
		})
	})
}

// TestProcLandlockOnlyDevices: without namespaces the command writes to
// the host's /dev/null, /dev/zero and /dev/full as every shell script
// does (before, Landlock refused `> /dev/null` and the judge, which took
// them as writable, reported nothing), and still cannot write a device
// the run was not given: the host's terminal.
func TestProcLandlockOnlyDevices(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		if e.id.root() {
			t.Skip("root refuses isolation = \"landlock-only\" (TestProcLandlockOnly covers it)")
		}
		pol := writePolicy(t, e, "landlock-only.toml", "isolation = \"landlock-only\"\n")
		r := e.sandboxd("run", "--policy", pol, "-c", `echo sunk > /dev/null && echo null-ok
head -c 3 /dev/zero | od -An -tx1
echo x 2>/dev/null > /dev/full || echo full-refused
head -c 8 /dev/urandom | wc -c`)
		wantCode(t, r, 0)
		if r.reportString("isolation") != "landlock-only" {
			t.Fatalf("report isolation %q\n%s", r.reportString("isolation"), r)
		}
		for _, want := range []string{"null-ok\n", " 00 00 00\n", "full-refused\n", "8\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("stdout lacks %q\n%s", want, r)
			}
		}
		noBoundaries(t, r)
	})
}

// TestCLIDoctor: doctor reports the landlock and namespace checks in text
// and in JSON.
func TestCLIDoctor(t *testing.T) {
	// Serial: doctor reports machine-wide state (kernel audit) that other runs change.
	forEach(t, func(t *testing.T, e *env) {
		r := e.sandboxd("doctor")
		if r.code != 0 && r.code != 1 {
			t.Fatalf("doctor: expected exit 0 or 1\n%s", r)
		}
		for _, name := range []string{"landlock", "namespaces"} {
			if !regexp.MustCompile(`(?m)^(ok|WARN)\s+` + name + `\s`).MatchString(r.stdout) {
				t.Fatalf("doctor prints no %s line\n%s", name, r)
			}
		}
		r = e.sandboxd("doctor", "--json")
		if r.code != 0 && r.code != 1 {
			t.Fatalf("doctor --json: expected exit 0 or 1\n%s", r)
		}
		var d struct {
			Checks []struct {
				Name   string `json:"name"`
				OK     *bool  `json:"ok"`
				Detail string `json:"detail"`
			} `json:"checks"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("doctor --json is not JSON: %v\n%s", err, r)
		}
		names := map[string]bool{}
		for _, c := range d.Checks {
			if c.OK == nil || c.Name == "" {
				t.Fatalf("doctor --json: malformed check %+v", c)
			}
			names[c.Name] = true
			// These machines run every attempt in a layer (the Txn tests):
			// doctor must say so.
			if c.Name == "copy-on-write layer" && !*c.OK {
				t.Fatalf("doctor says the layer does not work: %s", c.Detail)
			}
		}
		if !names["copy-on-write layer"] {
			t.Fatalf("doctor --json has no copy-on-write layer check: %v", names)
		}
		if !names["landlock"] || !names["namespaces"] {
			t.Fatalf("doctor --json checks lack landlock or namespaces: %v", names)
		}
	})
}

// ---- helpers for this file ----

// sleepArg returns a unique `sleep` argument (also the survivor marker)
// such as "1000.482139776".
func sleepArg(secs int) string {
	n, err := crand.Int(crand.Reader, big.NewInt(1_000_000_000))
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("%d.%09d1", secs, n.Int64())
}

// waitForSleeps is shell that waits (bounded) until want processes run
// `sleep arg` inside the sandbox and prints running=N.
func waitForSleeps(arg string, want int) string {
	pat := "^sleep " + strings.ReplaceAll(arg, ".", "[.]") + "$"
	return fmt.Sprintf(`for i in $(seq 200); do n=$(pgrep -c -f '%s'); [ "$n" -ge %d ] && break; sleep 0.05; done; echo "running=$(pgrep -c -f '%s')"`, pat, want, pat)
}

func writePolicy(t *testing.T, e *env, name, content string) string {
	t.Helper()
	p := filepath.Join(e.dir, "policies", name)
	e.writeFile(p, content, 0o644)
	return p
}

// hostCanFork fails unless the host (and the test user) can still start
// processes.
func hostCanFork(t *testing.T, e *env) {
	t.Helper()
	if err := exec.Command("true").Run(); err != nil {
		t.Fatalf("the host cannot fork after the run: %v", err)
	}
	if os.Geteuid() == 0 && !e.id.root() {
		cmd := exec.Command("true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}}
		if err := cmd.Run(); err != nil {
			t.Fatalf("the caller's uid cannot fork on the host after the run: %v", err)
		}
	}
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("expected exit %d\n%s", code, r)
	}
	if r.report != nil {
		if got, _ := r.report["exit_code"].(float64); int(got) != code {
			t.Fatalf("report exit_code %v, want %d\n%s", r.report["exit_code"], code, r)
		}
	}
}

// badInput asserts a refused invocation: exit 125, exactly one line on
// stderr starting with "sandboxd:", and no sign the command ran.
func badInput(t *testing.T, r result, token, marker string) {
	t.Helper()
	if r.code != 125 {
		t.Fatalf("expected exit 125\n%s", r)
	}
	if !strings.HasPrefix(r.stderr, "sandboxd:") || !strings.HasSuffix(r.stderr, "\n") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("expected one line on stderr starting with \"sandboxd:\"\n%s", r)
	}
	if strings.Contains(r.stdout, token) {
		t.Fatalf("the command ran\n%s", r)
	}
	mustNotExist(t, marker, r)
}

func mustExist(t *testing.T, p string, r result) {
	t.Helper()
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("%s: %v\n%s", p, err, r)
	}
}

func mustNotExist(t *testing.T, p string, r result) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Fatalf("%s exists: the command ran\n%s", p, r)
	}
}

func hasLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	before, _, _ := strings.Cut(after, to)
	return before
}

func countFiles(dir string) int {
	n := 0
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestProcInterruptTwice: a command that ignores SIGINT and SIGTERM
// keeps running after one Ctrl-C (SIGINT reaches it, and it may clean
// up), and a second SIGINT, or a SIGTERM after the SIGINT, kills its
// whole tree at once: sandboxd returns and nothing survives.
func TestProcInterruptTwice(t *testing.T) {
	// Serial: it signals sandboxd at fixed times and times its return.
	forEach(t, func(t *testing.T, e *env) {
		for _, second := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(second.String(), func(t *testing.T) {
				arg := sleepArg(300)
				var survivedFirst bool
				var sent time.Time
				r := e.sandboxdOpts(runOpts{timeout: 60 * time.Second, started: func(p *os.Process) {
					if !waitRunning(arg, 2, 20*time.Second) {
						return
					}
					p.Signal(syscall.SIGINT)
					time.Sleep(500 * time.Millisecond)
					survivedFirst = countRunning(arg) == 2
					sent = time.Now()
					p.Signal(second)
				}}, "run", "-c", "trap '' INT TERM; (sleep "+arg+" &); sleep "+arg)
				if sent.IsZero() {
					t.Fatalf("the command's sleep was never seen running\n%s", r)
				}
				if !survivedFirst {
					t.Errorf("one SIGINT ended a command that ignores it\n%s", r)
				}
				if took := time.Since(sent); took > 5*time.Second {
					t.Errorf("sandboxd took %v to return after the second signal", took)
				}
				if r.code == 0 {
					t.Errorf("exit 0 after a forced kill\n%s", r)
				}
				noSurvivors(t, arg)
			})
		}
	})
}

// countRunning counts processes running `sleep arg` on the host.
func countRunning(arg string) int {
	out, _ := exec.Command("pgrep", "-c", "-f", "^sleep "+strings.ReplaceAll(arg, ".", "[.]")+"$").Output()
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// waitRunning waits until at least want processes run `sleep arg`.
func waitRunning(arg string, want int, limit time.Duration) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if countRunning(arg) >= want {
			return true
		}
	}
	return false
}
