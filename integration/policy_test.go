package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyStrictProfile: the strict profile denies $HOME except its
// allow list, and hides the listing of $HOME too.
func TestPolicyStrictProfile(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.home, "notes.txt"), e.canary+"\n", 0o644)
		e.writeFile(filepath.Join(e.home, "tools", "bin", "tool"), "TOOL-OK\n", 0o644)
		pol := filepath.Join(e.mkdir("policy", 0o755), "policy.toml")
		e.writeFile(pol, "profile = \"strict\"\n[filesystem]\nhome_allow = [\"~/tools\"]\n", 0o644)
		e.writeFile(filepath.Join(e.home, ".config", "other", "conf"), "OTHER-CONF\n", 0o644)
		r := e.sandboxd("run", "--policy", pol, "-c",
			"cat ~/notes.txt; ls ~; cat ~/tools/bin/tool; cat ~/.config/other/conf; cat ~/.gitconfig; echo END")
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("command did not run\n%s", r)
		}
		e.noCanary(t, r)
		if strings.Contains(r.stdout, "notes.txt") {
			t.Fatalf("the strict profile let the command list $HOME\n%s", r)
		}
		if !strings.Contains(r.stdout, "TOOL-OK") {
			t.Fatalf("an allow-listed path was not readable\n%s", r)
		}
		if strings.Contains(r.stdout, "OTHER-CONF") {
			t.Fatalf("a path off the allow list was readable\n%s", r)
		}
		if !strings.Contains(r.stdout, "Sandbox Test") {
			t.Fatalf("~/.gitconfig is on the built-in allow list but was not readable\n%s", r)
		}
		// The default profile reads the same file.
		r = e.sh("cat ~/notes.txt")
		if !strings.Contains(r.stdout, e.canary) {
			t.Fatalf("the default profile should read ~/notes.txt\n%s", r)
		}
	})
}

// TestPolicyWorkspaceTightens: a workspace .sandboxd.toml can add a
// secret, and the added secret is enforced.
func TestPolicyWorkspaceTightens(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.home, "project-token"), e.canary+"\n", 0o644)
		e.writeFile(filepath.Join(e.ws, ".sandboxd.toml"), "[filesystem]\nsecrets = [\"~/project-token\"]\n", 0o644)
		r := e.sh("cat ~/project-token; echo END")
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("command did not run\n%s", r)
		}
		e.noCanary(t, r)
		// The policy file itself is a persistence path: read-only inside.
		check := fileUnchanged(t, filepath.Join(e.ws, ".sandboxd.toml"))
		e.sh("echo 'profile = \"default\"' > .sandboxd.toml; rm -f .sandboxd.toml")
		check()
	})
}
