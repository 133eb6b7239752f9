package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartupHardDenied: outside the workspace, what the host runs later
// without being asked is hard-denied before any reviewer, even one that
// allows everything: shell start-up files, a systemd user unit, an
// autostart entry, the session's environment, a program on a directory a
// login shell puts on PATH, your git config, a Python .pth file, another
// repository's hooks and a protected name in another project. Each stays
// as it was, is a hard-deny boundary, and is never shown to the model;
// a plain file in the home, which the model allows, is written. Your own
// policy may allow one start-up file by its exact path; a workspace
// policy may not.
func TestStartupHardDenied(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, func(string) (string, string, string, string) {
			return "allow", "low", "high", "the user asked for it"
		})
		home := func(rel string) string { return filepath.Join(e.home, rel) }
		for _, d := range []string{".config/systemd/user", ".config/autostart", ".config/environment.d", ".local/bin",
			".local/lib/python3.11/site-packages", "notes", "other"} {
			e.writeFile(home(d+"/.keep"), "", 0o644)
		}
		e.hostGitIn(t, home("other"), "init", "-q")
		existing := []string{".bashrc", ".profile", ".bash_aliases", ".gitconfig"}
		for _, f := range existing[:3] {
			e.writeFile(home(f), "original\n", 0o644)
		}
		pol := modelPolicy(t, e, m, "")
		opts := runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}}
		run := func(policy, script string) result {
			return e.sandboxdOpts(opts, "run", "--policy", policy, "--reviewer", "model", "-c", script)
		}
		// The control: a plain file in the home, which the model allows,
		// is written on the retry.
		r := run(pol, "echo allowed > "+home("notes/allowed.txt"))
		if b, err := os.ReadFile(home("notes/allowed.txt")); err != nil || string(b) != "allowed\n" {
			t.Fatalf("the model's allow of a plain file did not land (the test would prove nothing): %q %v\n%s", b, err, r)
		}
		// Each alone: with an allow it would be granted and written on
		// the retry.
		for _, f := range append(append([]string{}, existing...), ".zshenv", ".config/systemd/user/evil.service",
			".config/autostart/evil.desktop", ".config/environment.d/90-evil.conf", ".local/bin/git",
			".local/lib/python3.11/site-packages/evil.pth", "other/.git/hooks/pre-commit", "other/.git/config", "other/.envrc") {
			before, _ := os.ReadFile(home(f))
			asked := len(m.requests())
			r := run(pol, fmt.Sprintf("echo 'touch %s' >> %s", e.mark(), home(f)))
			if b, _ := os.ReadFile(home(f)); string(b) != string(before) {
				t.Errorf("%s was written: %q\n%s", f, b, r)
			}
			if len(m.requests()) != asked {
				t.Errorf("%s was put to the model (start-up locations are refused before any reviewer)", f)
			}
			found := false
			for _, b := range boundaries(r) {
				if p, _ := b["path"].(string); p == home(f) || strings.HasPrefix(home(f), strings.TrimSuffix(p, "/")+"/") {
					found = true
					if b["source"] != "hard-deny" {
						t.Errorf("%s decided by %v, want hard-deny\n%s", f, b["source"], r)
					}
				}
			}
			if !found {
				t.Errorf("%s: no boundary reported\n%s", f, r)
			}
		}
		if e.marked() {
			t.Errorf("the marker exists")
		}

		// Your own policy names one exactly: written.
		own := modelPolicy(t, e, m, fmt.Sprintf("[boundaries]\nallow = [\"fs write_file %s\"]", home(".bash_aliases")))
		r = run(own, "echo 'alias ll=\"ls -l\"' >> ~/.bash_aliases")
		if b, _ := os.ReadFile(home(".bash_aliases")); !strings.Contains(string(b), "alias ll") {
			t.Errorf("your own policy's exact allow of ~/.bash_aliases did not let the write through: %q\n%s", b, r)
		}
		// A workspace policy cannot.
		e.writeFile(filepath.Join(e.ws, ".sandboxd.toml"), fmt.Sprintf("[boundaries]\nallow = [\"fs write_file %s\"]\n", home(".bashrc")), 0o644)
		before, _ := os.ReadFile(home(".bashrc"))
		r = run(pol, "echo evil >> ~/.bashrc")
		if b, _ := os.ReadFile(home(".bashrc")); string(b) != string(before) {
			t.Errorf("a workspace policy's allow let ~/.bashrc be written: %q\n%s", b, r)
		}
	})
}
