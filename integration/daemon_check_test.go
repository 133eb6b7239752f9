package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent's own file tools (pi's read, write and edit) run outside
// every sandbox; the daemon's check says, by sandboxd's rules alone and
// without a reviewer, which of their operations sandboxd refuses: a
// secret, a start-up location, a name a file tool may not write in the
// workspace (also through a link), and nothing else.
func TestDaemonCheck(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status").mustSucceed(t)
		tok, _ := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid)))
		check := func(op, path string) (int, map[string]any) {
			return e.daemonPost(socket, strings.TrimSpace(string(tok)), "/v1/check", e.home,
				map[string]any{"surface": "filesystem", "operation": op, "path": path})
		}
		e.writeFile(filepath.Join(e.home, ".bashrc"), "# rc\n", 0o644)
		link := filepath.Join(e.ws, "rc-link")
		if err := os.Symlink(filepath.Join(e.home, ".bashrc"), link); err != nil {
			t.Fatal(err)
		}
		e.chown(link)
		// Links the model can make in its workspace (a sandboxed command
		// may), to a directory of start-up files: a file tool writing
		// below them creates the directories it misses.
		cfg := filepath.Join(e.home, ".config")
		e.writeFile(filepath.Join(cfg, "keep"), "", 0o644)
		cfgLink, dangling := filepath.Join(e.ws, "cfg-link"), filepath.Join(e.ws, "autostart-link")
		for l, target := range map[string]string{cfgLink: cfg, dangling: filepath.Join(cfg, "autostart")} {
			if err := os.Symlink(target, l); err != nil {
				t.Fatal(err)
			}
			e.chown(l)
		}
		for _, c := range []struct {
			op, path string
			denied   bool
			why      string
		}{
			{"read_file", filepath.Join(e.home, ".ssh", "id_rsa"), true, "credential stores"},
			{"write_file", filepath.Join(e.home, ".bashrc"), true, "start-up location"},
			{"write_file", link, true, "start-up location"},
			{"write_file", filepath.Join(e.ws, ".git", "hooks", "pre-commit"), true, "git's own directory"},
			{"make_reg", filepath.Join(e.ws, "sub", ".vscode", "tasks.json"), true, "file tools may not write"},
			{"write_file", filepath.Join(cfgLink, "autostart", "x.desktop"), true, "start-up location"},
			{"write_file", filepath.Join(cfgLink, "git", "config"), true, "start-up location"},
			{"write_file", filepath.Join(dangling, "x.desktop"), true, "start-up location"},
			{"write_file", filepath.Join(e.ws, "new", "dir", "main.go"), false, ""},
			{"write_file", filepath.Join(e.ws, "src", "main.go"), false, ""},
			{"read_file", filepath.Join(e.ws, ".vscode", "tasks.json"), false, ""},
			{"read_file", "/etc/hostname", false, ""},
		} {
			code, out := check(c.op, c.path)
			if code != 200 || out["denied"] != c.denied || !strings.Contains(fmt.Sprint(out["why"]), c.why) {
				t.Errorf("%s %s: %d %v, want denied %v (%s)", c.op, c.path, code, out, c.denied, c.why)
			}
		}
		// A check decides nothing for anything but a path, and grants nothing.
		if code, out := e.daemonPost(socket, strings.TrimSpace(string(tok)), "/v1/check", e.home,
			map[string]any{"surface": "network", "operation": "connect", "destination": "example.com:443"}); code != 400 {
			t.Errorf("a destination: %d %v", code, out)
		}
		if code, out := e.daemonPost(socket, strings.TrimSpace(string(tok)), "/v1/check", e.home,
			map[string]any{"surface": "filesystem", "operation": "read_file", "path": "/etc/hostname", "grant": true}); code != 400 {
			t.Errorf("a grant asked of a check: %d %v", code, out)
		}
	})
}
