package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// privateKeyPEM is a real PKCS#8 private key with the canary in a
// header line, so its content is a key however it is looked at.
func privateKeyPEM(t *testing.T, canary string) string {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Headers: map[string]string{"Comment": canary}, Bytes: der}))
}

// TestCredentialStoresByClass: credential stores of the class — the
// documented stores at their default places and where XDG_CONFIG_HOME
// moves them, and files named as histories, credentials, tokens, auth
// files, private keys and password files anywhere in the home — are
// unreadable inside and each is reported once, as a hard deny; a
// repository's own tokens.go, testdata/server.key and .env under the
// home, and the histories the quiet list keeps, stay readable with no
// boundary; a mixed config (gradle.properties) is read as a copy
// without its credentials.
func TestCredentialStoresByClass(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		// XDG_CONFIG_HOME in a directory whose name says nothing (no
		// leading dot): only the variable makes it tools' state.
		xdg := filepath.Join(e.home, "dotfiles", "config")
		key := privateKeyPEM(t, e.canary)
		stores := map[string]string{
			// Documented stores (credstore/stores.go), some the issue
			// named and others of the same class.
			"~/.config/git/credentials":            "https://u:" + e.canary + "@example.com\n",
			"~/.local/share/fish/fish_history":     "- cmd: export TOKEN=" + e.canary + "\n",
			"~/.pgpass":                            "db:5432:*:u:" + e.canary + "\n",
			"~/.my.cnf":                            "[client]\npassword=" + e.canary + "\n",
			"~/.config/containers/auth.json":       `{"auths":{"r":{"auth":"` + e.canary + `"}}}`,
			"~/.huggingface/token":                 e.canary,
			"~/.cache/huggingface/token":           e.canary,
			"~/.kaggle/kaggle.json":                `{"key":"` + e.canary + `"}`,
			"~/.config/solana/id.json":             "[" + e.canary + "]",
			"~/.local/state/lesshst":               e.canary,
			"~/.terraform.d/credentials.tfrc.json": e.canary,
			xdg + "/gh/hosts.yml":                  "oauth_token: " + e.canary + "\n",
			xdg + "/git/credentials":               e.canary,
			// Found by name, at no documented place.
			"~/.zhistory":                              e.canary,
			"~/.histfile":                              e.canary,
			"~/.docker/key.pem":                        key,
			"~/.someagent/auth.json":                   `{"token":"` + e.canary + `"}`,
			"~/.config/newtool/token":                  e.canary,
			"~/.local/share/othercli/credentials.json": e.canary,
			"~/old-laptop/.bash_history":               e.canary,
			"~/Documents/passwords.txt":                e.canary,
			"~/Documents/tls/client.key":               key,
			"~/Documents/vault.kdbx":                   e.canary,
			xdg + "/newtool/secrets.yaml":              e.canary,
		}
		stores["~/.netrc~"] = "machine h password " + e.canary + "\n" // a backup of a store
		stores["~/.config/x/Credentials.JSON"] = e.canary             // any letter case
		var paths []string
		for p, content := range stores {
			full := strings.Replace(p, "~", e.home, 1)
			e.writeFile(full, content, 0o600)
			paths = append(paths, full)
		}
		sort.Strings(paths)
		// A repository under the home (not the workspace) with files of
		// those names, and a quiet history: readable, no boundary.
		repo := filepath.Join(e.home, "src", "app")
		e.writeFile(filepath.Join(repo, "tokens.go"), "package app // tokens\n", 0o644)
		e.writeFile(filepath.Join(repo, "testdata", "server.key"), privateKeyPEM(t, "FIXTURE"), 0o644)
		e.writeFile(filepath.Join(repo, ".env"), "FIXTURE_ENV=1\n", 0o644)
		e.writeFile(filepath.Join(repo, "passwords_test.go"), "package app\n", 0o644)
		if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		e.chown(filepath.Join(repo, ".git"))
		exec.Command("chown", "-R", fmt.Sprintf("%d:%d", e.id.uid, e.id.gid), repo).Run()
		e.writeFile(filepath.Join(e.home, ".node_repl_history"), "1+1\n", 0o600)
		// A dotfiles manager's link into its work tree: the store behind
		// it is denied (reported at either path), the tree's own files
		// elsewhere are not.
		dotfiles := filepath.Join(e.home, "dotfiles")
		e.writeFile(filepath.Join(dotfiles, "linked", "token"), e.canary, 0o600)
		e.writeFile(filepath.Join(dotfiles, "README"), "FIXTURE_DOTFILES\n", 0o644)
		if out, err := exec.Command("git", "init", "-q", dotfiles).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		exec.Command("chown", "-R", fmt.Sprintf("%d:%d", e.id.uid, e.id.gid), dotfiles).Run()
		linked := filepath.Join(e.home, ".config", "linked")
		if err := os.Symlink(filepath.Join(dotfiles, "linked"), linked); err != nil {
			t.Fatal(err)
		}
		os.Lchown(linked, e.id.uid, e.id.gid)
		e.writeFile(filepath.Join(e.home, ".gradle", "gradle.properties"), "org.gradle.caching=true\nsigning.password="+e.canary+"\n", 0o600)

		script := "for f in " + strings.Join(paths, " ") + "; do cat $f; cat $f; done 2>/dev/null; " +
			"cat ~/.config/linked/token 2>/dev/null; cat ~/dotfiles/README " + repo + "/tokens.go " + repo + "/testdata/server.key " + repo + "/.env " + repo + "/passwords_test.go ~/.node_repl_history ~/.gradle/gradle.properties; echo END"
		r := e.sandboxdOpts(runOpts{env: []string{"XDG_CONFIG_HOME=" + xdg}}, append(append([]string{"run"}, e.runArgs...), "-c", script)...)
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("the command did not run\n%s", r)
		}
		e.noCanary(t, r)
		for _, want := range []string{"package app // tokens", "FIXTURE", "FIXTURE_ENV=1", "FIXTURE_DOTFILES", "1+1", "org.gradle.caching=true"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%q is not readable inside\n%s", want, r)
			}
		}
		bs, _ := r.report["boundaries"].([]any)
		count := map[string]int{}
		for _, b := range bs {
			m := b.(map[string]any)
			p, _ := m["path"].(string)
			count[p]++
			if m["operation"] != "read_file" || m["decision"] != "deny" || m["source"] != "hard-deny" {
				t.Errorf("boundary %v: want a hard-denied read", m)
			}
			if strings.HasPrefix(p, repo) || strings.HasSuffix(p, ".node_repl_history") || p == dotfiles+"/README" {
				t.Errorf("a boundary for a file that is not a credential store: %v", m)
			}
		}
		if count[linked+"/token"]+count[dotfiles+"/linked/token"] != 1 {
			t.Errorf("the linked store was reported %d times, want once (reported: %v)", count[linked+"/token"]+count[dotfiles+"/linked/token"], count)
		}
		for _, p := range paths {
			if count[p] != 1 {
				t.Errorf("%s: reported %d times, want once (reported: %v)", p, count[p], count)
			}
		}
	})
}

// TestCredentialStoresStrictHomeAllow: the strict profile keeps
// ~/.config/git and ~/.cargo readable, but not the credential stores
// inside them.
func TestCredentialStoresStrictHomeAllow(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.home, ".config", "git", "config"), "[core]\n\tpager = cat\n", 0o644)
		e.writeFile(filepath.Join(e.home, ".config", "git", "credentials"), "https://u:"+e.canary+"@h\n", 0o600)
		e.writeFile(filepath.Join(e.home, ".cargo", "config.toml"), "[net]\nretry = 2\n", 0o644)
		e.writeFile(filepath.Join(e.home, ".cargo", "credentials.toml"), "[registry]\ntoken = \""+e.canary+"\"\n", 0o600)
		pol := filepath.Join(e.dir, "strict.toml")
		e.writeFile(pol, "profile = \"strict\"\n", 0o644)
		r := e.sandboxd(append(append([]string{"run", "--policy", pol}, e.runArgs...), "-c",
			"cat ~/.config/git/config ~/.cargo/config.toml; cat ~/.config/git/credentials ~/.cargo/credentials.toml; echo END")...)
		e.noCanary(t, r)
		if !strings.Contains(r.stdout, "pager = cat") || !strings.Contains(r.stdout, "retry = 2") || !strings.Contains(r.stdout, "END") {
			t.Fatalf("the allowed configs are not readable\n%s", r)
		}
	})
}
