package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// authModel is a fake model endpoint that allows every boundary and
// records each request's Authorization header and body.
type authModel struct {
	url  string
	mu   sync.Mutex
	auth []string
	body []string
}

func newAuthModel(t *testing.T) *authModel {
	t.Helper()
	m := &authModel{}
	m.url = "http://" + serveLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.auth, m.body = append(m.auth, r.Header.Get("Authorization")), append(m.body, string(b))
		m.mu.Unlock()
		writeVerdict(w, "m", "allow", "low", "high", "a build output")
	}) + "/v1"
	return m
}

// seen is what the model was sent so far: the headers, then the bodies.
func (m *authModel) seen() ([]string, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.auth...), append([]string(nil), m.body...)
}

// TestDaemonMachineConfig: `sandboxd serve --config` with a machine
// configuration of root's. A uid not in [access] gets 403 from the
// token endpoint on; a machine policy's deny wins over the caller's
// allow in a run (the file is made without the daemon, and not with
// it); the operator's reviewer is used with the caller's own key file
// (sandboxd-test) or the machine's (root), whatever endpoint and key the
// caller's policy names, and its key is in no command's environment,
// report, prompt or daemon log line.
func TestDaemonMachineConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	top, err := os.MkdirTemp(baseDir, "machine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(top) })
	os.Chmod(top, 0o755)
	conf := filepath.Join(top, "etc")
	shared := filepath.Join(top, "shared")
	os.Mkdir(conf, 0o755)
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777)
	machineKey, userKey := "sk-machine-"+randHex(8), "sk-user-"+randHex(8)
	os.WriteFile(filepath.Join(conf, "machine.key"), []byte(machineKey+"\n"), 0o600)
	os.WriteFile(filepath.Join(conf, "user.key"), []byte(userKey+"\n"), 0o600)
	model, evil := newAuthModel(t), newAuthModel(t)
	cfg := filepath.Join(conf, "sandboxd.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`[access]
users = [%q]

[policy.boundaries]
deny = ["fs make_reg %s/**"]

[review]
model = "machine-model"
base_url = %q
key_file = %q

[review.users.%s]
key_file = %q

[limits]
max_execs = 8
`, testUser, shared, model.url, filepath.Join(conf, "machine.key"), testUser, filepath.Join(conf, "user.key"))), 0o644)
	socket, dlog := startDaemonLog(t, "--config", cfg)
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", dlog.String())
		}
	}()

	// uid 65534 is in no [access] list: refused before its token.
	curl := exec.Command("curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", socket, "-X", "POST", "http://sandboxd/v1/token")
	curl.Dir, curl.Env = "/", []string{"PATH=/usr/bin:/bin"}
	curl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, _ := curl.Output()
	if !strings.HasSuffix(string(out), "\n403") || !strings.Contains(string(out), `"code":"not_allowed"`) {
		t.Errorf("a uid not in [access]: %s", out)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(socket), "tokens", "65534")); err == nil {
		t.Error("a uid not in [access] got a token file")
	}

	forEach(t, func(t *testing.T, e *env) {
		vars := []string{"SANDBOXD_SOCKET=" + socket, "FAKE_REVIEW_KEY=callers-own-key"}
		// The caller's own policy allows the writes the machine denies,
		// and names a model, endpoint and key of its own.
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), fmt.Sprintf(
			"[boundaries]\nallow = [\"fs make_reg %s/**\"]\n[review]\nmodel = \"mine\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\n",
			shared, evil.url), 0o644)
		mine := fmt.Sprintf("%s/%d-", shared, e.id.uid)
		r := e.sandboxdOpts(runOpts{env: vars}, "run", "--no-daemon", "--reviewer", "off", "-c", "echo x > "+mine+"embedded")
		if _, err := os.Lstat(mine + "embedded"); err != nil {
			t.Fatalf("the caller's allow without the daemon: %v\n%s", err, r)
		}
		r = e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--reviewer", "off", "-c", "echo x > "+mine+"daemon")
		if _, err := os.Lstat(mine + "daemon"); err == nil {
			t.Fatalf("the machine's deny did not hold through the daemon\n%s", r)
		}
		denied := false
		for _, b := range boundaries(r) {
			denied = denied || b["path"] == mine+"daemon" && b["decision"] == "deny" && b["source"] == "policy"
		}
		if !denied {
			t.Errorf("no policy deny in the report\n%s", r)
		}

		// The model reviews a write outside the workspace: the
		// operator's endpoint with the operator's key for this caller.
		outside := filepath.Join(e.mkdir("out", 0o755), "x.txt")
		r = e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--reviewer", "model", "-c", "env; echo x > "+outside)
		if b, err := os.ReadFile(outside); err != nil || string(b) != "x\n" {
			t.Fatalf("the model's allow: %q %v\n%s", b, err, r)
		}
		want := "Bearer " + machineKey
		if !e.id.root() {
			want = "Bearer " + userKey
		}
		auth, bodies := model.seen()
		if len(auth) == 0 || auth[len(auth)-1] != want {
			t.Errorf("the operator's endpoint was sent %q, want %q", auth, want)
		}
		if a, _ := evil.seen(); len(a) > 0 {
			t.Errorf("the caller's endpoint was sent %q", a)
		}
		report, _ := json.Marshal(r.report)
		for what, text := range map[string]string{"the command's output": r.stdout + r.stderr, "the report": string(report),
			"a prompt": strings.Join(bodies, "\n"), "the daemon's log": dlog.String()} {
			for _, k := range []string{machineKey, userKey} {
				if strings.Contains(text, k) {
					t.Errorf("a machine key is in %s", what)
				}
			}
		}
	})
}

// TestDaemonMachineConfigRefused: the daemon does not start on a machine
// configuration it cannot trust or read, and says which file, line and
// key.
func TestDaemonMachineConfigRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	dir, err := os.MkdirTemp(baseDir, "machine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(dir) })
	os.Chmod(dir, 0o755)
	cfg := filepath.Join(dir, "sandboxd.toml")
	cases := []struct {
		name, doc string
		mode      os.FileMode
		want      string
	}{
		{"missing", "", 0, cfg + ": the machine configuration cannot be used (no such file or directory)"},
		{"writable by others", "[limits]\nmax_execs = 2\n", 0o666, cfg + ": the machine configuration cannot be used: it may be written by others than root (mode 0666)"},
		{"a bad key", "[access]\nusers = [\"no-such-user-here\"]\n", 0o644, cfg + `:2: access.users: no user "no-such-user-here" on this machine`},
		{"an invalid machine policy value", "[policy]\nisolation = \"sometimes\"\n", 0o644, cfg + `:2: policy.isolation: invalid value "sometimes"`},
	}
	for _, tc := range cases {
		os.Remove(cfg)
		if tc.mode != 0 {
			os.WriteFile(cfg, []byte(tc.doc), tc.mode)
			os.Chmod(cfg, tc.mode)
		}
		cmd := exec.Command(binary, "serve", "--socket", filepath.Join(dir, "run", "sandboxd.sock"), "--config", cfg)
		cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin", "HOME=/root"}
		out, err := cmd.CombinedOutput()
		if x, ok := err.(*exec.ExitError); !ok || x.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v\n%s\nwant %s", tc.name, err, out, tc.want)
		}
		if _, err := os.Lstat(filepath.Join(dir, "run", "sandboxd.sock")); err == nil {
			t.Errorf("%s: the daemon listened", tc.name)
		}
	}
}
