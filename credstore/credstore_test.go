package credstore

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStoresWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Stores() {
		head, _, _ := strings.Cut(s.At, "/")
		if head != "~" && !strings.HasPrefix(head, "$") {
			t.Errorf("%q: must start with ~ or $VAR", s.At)
		}
		if s.At != filepath.Clean(s.At) || strings.Contains(s.At, "..") {
			t.Errorf("%q: not clean", s.At)
		}
		if s.Tool == "" || !strings.HasPrefix(s.Doc, "https://") {
			t.Errorf("%q: needs its tool and an https documentation link (%q, %q)", s.At, s.Tool, s.Doc)
		}
		if seen[s.At] {
			t.Errorf("%q listed twice", s.At)
		}
		seen[s.At] = true
		if strings.ContainsAny(filepath.Dir(s.At), "*?[") {
			t.Errorf("%q: only the last element may be a glob", s.At)
		}
	}
}

func TestStorePaths(t *testing.T) {
	env := map[string]string{
		"XDG_CONFIG_HOME": "/cfg",
		"XDG_DATA_HOME":   "relative/not/used",
		"GNUPGHOME":       "/keys/gnupg/",
		"KUBECONFIG":      "/a/kube:relative:/b/kube",
	}
	d := Dirs{Home: "/home/u", Getenv: func(k string) string { return env[k] }}
	for _, c := range []struct {
		at   string
		want []string
		def  string
	}{
		{"~/.ssh", []string{"/home/u/.ssh"}, "~/.ssh"},
		{"$XDG_CONFIG_HOME/gh", []string{"/cfg/gh", "/home/u/.config/gh"}, "~/.config/gh"},
		{"$XDG_DATA_HOME/keyrings", []string{"/home/u/.local/share/keyrings"}, "~/.local/share/keyrings"},
		{"$XDG_CACHE_HOME/huggingface/token", []string{"/home/u/.cache/huggingface/token"}, "~/.cache/huggingface/token"},
		{"$GNUPGHOME", []string{"/keys/gnupg"}, ""},
		{"$CARGO_HOME/credentials.toml", nil, ""},
		{"$KUBECONFIG", []string{"/a/kube", "/b/kube"}, ""},
	} {
		s := Store{At: c.at}
		if got := s.Paths(d); !slices.Equal(got, c.want) {
			t.Errorf("%s: paths %q, want %q", c.at, got, c.want)
		}
		if got := s.Default(); got != c.def {
			t.Errorf("%s: default %q, want %q", c.at, got, c.def)
		}
	}
}

func TestMatchName(t *testing.T) {
	pats := namePatterns()
	for _, c := range []struct {
		name, parent string
		dir, tool    bool
		want         Class
		sniff        bool
	}{
		// The examples and more of each class.
		{name: "fish_history", tool: true, want: History},
		{name: ".zhistory", want: History},
		{name: ".histfile", want: History},
		{name: ".zsh_history", want: History},
		{name: ".mycli-history", want: History},
		{name: "history.sqlite", tool: true, want: History},
		{name: "main.shada", tool: true, want: History},
		{name: ".pgpass", want: Credentials},
		{name: ".my.cnf", want: Credentials},
		{name: "credentials", tool: true, want: Credentials},
		{name: "credentials.toml", tool: true, want: Credentials},
		{name: "credentials-config.json", tool: true, want: Credentials},
		{name: "oauth_creds.json", tool: true, want: Credentials},
		{name: "kaggle.json", want: Credentials},
		{name: "auth.json", tool: true, want: Token},
		{name: "mcp-auth.json", tool: true, want: Token},
		{name: "token", tool: true, want: Token},
		{name: "access-token", tool: true, want: Token},
		{name: "mcp-oauth-tokens-v2.json", tool: true, want: Token},
		{name: "access_tokens.db", tool: true, want: Token},
		{name: "secrets.yaml", tool: true, want: Token},
		{name: ".env", tool: true, want: Token},
		{name: "oauth-keys.env", tool: true, want: Token},
		{name: "id.keypair.json", tool: true, want: Token},
		{name: "passwords.txt", want: Password},
		{name: "MyPasswords.kdbx", want: Password},
		{name: "vault.kdbx", want: Keyring},
		{name: "c.pwd", tool: true, want: Keyring},
		{name: "id_ed25519", want: PrivateKey, sniff: true},
		{name: "deploy_rsa", want: PrivateKey, sniff: true},
		{name: "key.pem", want: PrivateKey, sniff: true},
		{name: "server.key", want: PrivateKey, sniff: true},
		{name: "wg0.conf", parent: "wireguard", want: PrivateKey, sniff: true},
		{name: "client.p12", want: KeyStore},
		{name: "release.keystore", want: KeyStore},
		{name: "wallet.dat", want: Keyring},
		{name: "keyrings", dir: true, tool: true, want: Keyring},
		{name: "private-keys-v1.d", dir: true, tool: true, want: Keyring},
		{name: "TOKEN", tool: true, want: Token},
		{name: "Credentials.JSON", tool: true, want: Credentials},
		{name: ".PGPASS", want: Credentials},
		{name: ".pgpass~", want: Credentials},
		{name: ".netrc.bak", want: Credentials},
		{name: "#.bash_history#", want: History},
		{name: ".auth.json.swp", tool: true, want: Token},
		{name: "secrets", dir: true, tool: true, want: Token},
		{name: "credentials.csv", want: Credentials},
		{name: "alice_accessKeys.csv", want: Credentials},
		{name: "adbkey", want: PrivateKey, sniff: true},
		// Not stores.
		{name: "go.env", tool: true},
		{name: "google-auth-library-credentials-1.0.jar", tool: true},
		{name: "notes.txt~"},
		{name: "tokens.go", tool: true},
		{name: "token.go", tool: true},
		{name: "password_reset.py", tool: true},
		{name: "passwords.md"},
		{name: "credentials.py", tool: true},
		{name: "tokenizer.json", tool: true},
		{name: "tokenizer_config.json", tool: true},
		{name: "id_ed25519.pub"},
		{name: "debug.keystore"},
		{name: "history.js", tool: true},
		{name: ".env.example", tool: true},
		{name: "wg0.conf", parent: "etc"},
		{name: "README"},
		// Generic names outside tools' state are a project's own.
		{name: "token"},
		{name: "auth.json"},
		{name: "secrets.yaml"},
		{name: "credentials.json"},
		{name: ".env"},
		{name: "history.txt"},
		{name: "keyrings", dir: true},
	} {
		m, ok := matchName(c.name, c.dir, c.parent, c.tool, pats)
		switch {
		case c.want == "" && ok:
			t.Errorf("%s (dir %v, tool state %v): matched as %s, want no match", c.name, c.dir, c.tool, m.class)
		case c.want != "" && (!ok || m.class != c.want || m.sniff != c.sniff):
			t.Errorf("%s (dir %v, tool state %v): got %+v %v, want %s sniff %v", c.name, c.dir, c.tool, m, ok, c.want, c.sniff)
		}
	}
}

// keyPEMs returns private keys in the encodings tools write, and public
// material that must stay readable.
func keyPEMs(t testing.TB) (private, public map[string][]byte) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(edKey)
	ecDER, _ := x509.MarshalECPrivateKey(ecKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ecKey.PublicKey, ecKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert})
	private = map[string][]byte{
		"pkcs1 pem":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}),
		"pkcs8 pem":     pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		"ec pem":        pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}),
		"cert then key": append(append([]byte(nil), certPEM...), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})...),
		"pkcs1 der":     x509.MarshalPKCS1PrivateKey(rsaKey),
		"pkcs8 der":     pkcs8,
		"ec der":        ecDER,
		"openssh":       []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"),
		"pgp":           []byte("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----\n"),
		"putty":         []byte("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\n"),
		"age":           []byte("# created: 2024\nAGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ\n"),
		"wireguard":     []byte("[Interface]\nAddress = 10.0.0.2/32\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n"),
		"minisign":      []byte("untrusted comment: minisign encrypted secret key\nRWRTY0Iy\n"),
	}
	public = map[string][]byte{
		"cert pem":   certPEM,
		"cert der":   cert,
		"public pem": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"public der": pub,
		"empty":      nil,
		"text":       []byte("key = value\n"),
		"ssh pub":    []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI user@host\n"),
	}
	return private, public
}

func TestPrivateKey(t *testing.T) {
	private, public := keyPEMs(t)
	for name, b := range private {
		if !privateKey(b) {
			t.Errorf("%s: not recognised as a private key", name)
		}
	}
	for name, b := range public {
		if privateKey(b) {
			t.Errorf("%s: taken for a private key", name)
		}
	}
}

func FuzzPrivateKey(f *testing.F) {
	private, public := keyPEMs(f)
	for _, b := range private {
		f.Add(b)
	}
	for _, b := range public {
		f.Add(b)
	}
	f.Add([]byte{0x30, 0x83, 0xff, 0xff, 0xff, 0x02, 0x01, 0x00})
	f.Add([]byte{0x30, 0x84})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Never panics; whatever precedes a PEM private key does not
		// hide it.
		privateKey(b)
		if !privateKey(append(append([]byte(nil), b...), "\n-----BEGIN PRIVATE KEY-----\n"...)) && len(b) < sniffBytes {
			t.Fatal("a PEM private key after other bytes was missed")
		}
	})
}

// home builds a home directory from a list of "path" (a file) and
// "path/" (a directory) entries, with content for some.
func home(t *testing.T, files map[string]string) string {
	t.Helper()
	h := t.TempDir()
	for p, content := range files {
		full := filepath.Join(h, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func scanCfg(h, index string) ScanConfig {
	return ScanConfig{
		Home:      h,
		StateDirs: []string{filepath.Join(h, ".config"), filepath.Join(h, ".local/share"), filepath.Join(h, ".local/state"), filepath.Join(h, ".cache")},
		CacheDirs: []string{filepath.Join(h, ".cache")},
		Index:     index,
		// Everything the test made looks settled.
		Now: func() time.Time { return time.Now().Add(time.Hour) },
	}
}

func foundPaths(h string, r Result) []string {
	var out []string
	for _, f := range r.Found {
		rel, _ := filepath.Rel(h, f.Path)
		out = append(out, rel)
	}
	return out
}

func TestScan(t *testing.T) {
	private, public := keyPEMs(t)
	h := home(t, map[string]string{
		".zhistory":                            "export TOKEN=x",
		".histfile":                            "x",
		".local/share/fish/fish_history":       "x",
		".config/containers/auth.json":         "{}",
		".docker/key.pem":                      string(private["pkcs1 pem"]),
		".docker/ca.pem":                       string(public["cert pem"]),
		".huggingface/token":                   "hf_x",
		".kaggle/kaggle.json":                  "{}",
		".config/solana/id.keypair.json":       "[1,2]",
		".codex-other/auth.json":               "{}",
		"Documents/passwords.txt":              "x",
		"Documents/notes/auth.json":            "{}",
		"Documents/old-home/.aws/credentials":  "x",
		"Documents/tls/server.key":             string(private["pkcs8 pem"]),
		"Documents/tls/server.crt":             string(public["cert pem"]),
		"src/project/.git/HEAD":                "ref: refs/heads/main",
		"src/project/tokens.go":                "package p",
		"src/project/testdata/server.key":      string(private["pkcs8 pem"]),
		"src/project/.env":                     "X=1",
		"bare.git/HEAD":                        "x",
		"bare.git/objects/":                    "",
		"bare.git/refs/":                       "",
		"bare.git/credentials":                 "x",
		"venv/pyvenv.cfg":                      "home = /usr",
		"venv/lib/secrets.json":                "{}",
		"app/node_modules/x/.env":              "x",
		"go/pkg/mod/example.com/x/credentials": "x",
		".cache/a/b/c/d/token":                 "deep in the cache",
		".cache/huggingface/token":             "hf_x",
		".android/debug.keystore":              "x",
		".ssh/id_ed25519.pub":                  "ssh-ed25519 AAAA",
		"broken/.dangling_history":             "",
	})
	os.Remove(filepath.Join(h, "broken/.dangling_history"))
	if err := os.Symlink("/nonexistent", filepath.Join(h, "broken/.dangling_history")); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(t.TempDir(), "state", "credindex")
	cfg := scanCfg(h, idx)
	r, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		".cache/huggingface/token",
		".codex-other/auth.json",
		".config/containers/auth.json",
		".config/solana/id.keypair.json",
		".docker/key.pem",
		".histfile",
		".huggingface/token",
		".kaggle/kaggle.json",
		".local/share/fish/fish_history",
		".zhistory",
		"Documents/old-home/.aws/credentials",
		"Documents/passwords.txt",
		"Documents/tls/server.key",
		"broken/.dangling_history",
	}
	if got := foundPaths(h, r); !slices.Equal(got, want) {
		t.Errorf("found (partial %q):\n  %s\nwant:\n  %s", r.Partial, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if r.Partial != "" || r.Reused != 0 || r.Read == 0 {
		t.Errorf("first scan: %+v", r)
	}

	// Again: nothing changed, nothing is read.
	r2, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Read != 0 || r2.Reused != r.Read || !slices.Equal(foundPaths(h, r2), want) {
		t.Errorf("second scan read %d, reused %d (first read %d), found %v", r2.Read, r2.Reused, r.Read, foundPaths(h, r2))
	}
	st1, _ := os.Stat(idx)
	r2, _ = Scan(context.Background(), cfg)
	if st2, _ := os.Stat(idx); st1 == nil || !os.SameFile(st1, st2) {
		t.Errorf("an index that still held was rewritten")
	}

	// A new store in an indexed directory, and a certificate rewritten
	// in place as a key (its directory's change time stays): both found,
	// and only the changed directory is read.
	if err := os.WriteFile(filepath.Join(h, "Documents/notes/.pgpass"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h, ".docker/ca.pem"), private["ec pem"], 0o600); err != nil {
		t.Fatal(err)
	}
	r3, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := foundPaths(h, r3)
	for _, p := range []string{"Documents/notes/.pgpass", ".docker/ca.pem"} {
		if !slices.Contains(got, p) {
			t.Errorf("after the change, %s not found: %v", p, got)
		}
	}
	if r3.Read != 1 {
		t.Errorf("after one directory changed, %d were read", r3.Read)
	}

	// An index made under other rules is not trusted.
	other := cfg
	other.StateDirs = other.StateDirs[:1]
	r4, err := Scan(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if r4.Reused != 0 {
		t.Errorf("an index made for other roots was reused for %d directories", r4.Reused)
	}
}

// TestScanXDGElsewhere: where XDG_CONFIG_HOME is outside the home, the
// stores there are found, generic names included.
func TestScanXDGElsewhere(t *testing.T) {
	h := home(t, map[string]string{"x/": ""})
	cfgDir := home(t, map[string]string{"gh/hosts.yml": "x", "tool/token": "x", "git/credentials": "x"})
	cfg := scanCfg(h, "")
	cfg.StateDirs = append(cfg.StateDirs, cfgDir)
	r, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range r.Found {
		got = append(got, f.Path)
	}
	want := []string{filepath.Join(cfgDir, "git/credentials"), filepath.Join(cfgDir, "tool/token")}
	if !slices.Equal(got, want) {
		t.Errorf("found %v, want %v", got, want)
	}
}

// BenchmarkScan: a home of 100 000 files in 2 000 directories, with and
// without a fresh index.
func BenchmarkScan(b *testing.B) {
	h := b.TempDir()
	for d := 0; d < 2000; d++ {
		dir := filepath.Join(h, "Documents", string(rune('a'+d%26)), "d"+strconvItoa(d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 50; f++ {
			if err := os.WriteFile(filepath.Join(dir, "f"+strconvItoa(f)+".txt"), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, indexed := range []bool{false, true} {
		name := "cold"
		if indexed {
			name = "indexed"
		}
		b.Run(name, func(b *testing.B) {
			idx := ""
			if indexed {
				idx = filepath.Join(b.TempDir(), "credindex")
			}
			cfg := ScanConfig{Home: h, Index: idx, Now: func() time.Time { return time.Now().Add(time.Hour) }}
			if _, err := Scan(context.Background(), cfg); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Scan(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func strconvItoa(i int) string { return big.NewInt(int64(i)).String() }

// TestPatternsValid: a malformed glob would silently match nothing.
func TestPatternsValid(t *testing.T) {
	for _, p := range namePatterns() {
		for _, g := range []string{p.glob, p.parent} {
			if _, err := path.Match(g, "x"); err != nil {
				t.Errorf("pattern %q: %v", g, err)
			}
		}
	}
	for _, s := range Stores() {
		if _, err := filepath.Match(filepath.Base(s.At), "x"); err != nil {
			t.Errorf("store %q: %v", s.At, err)
		}
	}
}

func TestLiteral(t *testing.T) {
	for glob, want := range map[string]string{"*[_\\-]auth.json": "auth.json", "*.pem": ".pem", "id_*": "id_", "*": "", ".env": ".env", "a[bc]de*f": "de"} {
		if got := literal(glob); got != want {
			t.Errorf("literal(%q) = %q, want %q", glob, got, want)
		}
	}
}

// TestScanCovered: a directory already denied whole is not walked.
func TestScanCovered(t *testing.T) {
	h := home(t, map[string]string{".mozilla/firefox/p/logins.json.password": "x", "x/.pgpass": "x"})
	cfg := scanCfg(h, "")
	cfg.Covered = []string{filepath.Join(h, ".mozilla")}
	r, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := foundPaths(h, r); !slices.Equal(got, []string{"x/.pgpass"}) {
		t.Errorf("found %v", got)
	}
}

// TestScanTheLongTail: the class reaches what dotfiles managers, editors
// and people do with stores — links into a dotfiles tree, a manager's
// work tree in tools' state, backups, other cases — and leaves alone
// toolchains' and build caches' files whose names only look like it.
func TestScanTheLongTail(t *testing.T) {
	private, _ := keyPEMs(t)
	h := home(t, map[string]string{
		"dotfiles/.git/HEAD":                                      "x",
		"dotfiles/myapp/token":                                    "x",
		"dotfiles/myapp/settings.json":                            "{}",
		".local/share/chezmoi/.git/HEAD":                          "x",
		".local/share/chezmoi/private_dot_ssh/private_id_ed25519": string(private["openssh"]),
		".local/share/chezmoi/dot_config/app/token":               "a fixture-like name in a work tree",
		".netrc":                     "x",
		".netrc~":                    "x",
		".pgpass.bak":                "x",
		"#.zsh_history#":             "x",
		".config/x/TOKEN":            "x",
		".config/x/Credentials.json": "x",
		"Documents/.Passwords.TXT":   "x",
		".local/go/go.env":           "GOPROXY=https://proxy.golang.org",
		".local/share/gradle/caches/google-auth-library-credentials-1.0.jar": "x",
		".local/share/go/pkg/mod/example.com/x/credentials":                  "x",
		".local/share/elsewhere-cache/credentials":                           "x",
		".config/app/secrets/db":                                             "x",
		"snap/firefox/common/.mozilla/firefox/p/logins.json":                 "x",
		"snap/firefox/common/.cache/mozilla/x/credentials":                   "a cache: not walked",
		".var/app/org.chromium.Chromium/config/chromium/Default/Login Data":  "x",
		".var/app/org.chromium.Chromium/cache/x/token":                       "a cache: not walked",
	})
	if err := os.Symlink(filepath.Join(h, "dotfiles/myapp"), filepath.Join(h, ".config/myapp")); err != nil {
		t.Fatal(err)
	}
	cfg := scanCfg(h, "")
	cfg.Covered = []string{filepath.Join(h, ".netrc")}
	cfg.Skip = []string{filepath.Join(h, ".local/share/elsewhere-cache")}
	r, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"#.zsh_history#",
		".config/app/secrets",
		".config/myapp/token",
		".config/x/Credentials.json",
		".config/x/TOKEN",
		".local/share/chezmoi/private_dot_ssh/private_id_ed25519",
		".netrc",
		".netrc~",
		".pgpass.bak",
		".var/app/org.chromium.Chromium/config/chromium/Default/Login Data",
		"Documents/.Passwords.TXT",
		"snap/firefox/common/.mozilla/firefox/p/logins.json",
	}
	if got := foundPaths(h, r); !slices.Equal(got, want) {
		t.Errorf("found (partial %q):\n  %s\nwant:\n  %s", r.Partial, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestScanUnsettled: a directory read within the clock's granularity of
// its last change is read again next time, even when its change time
// has not moved since: on a coarse clock an entry added in the same tick
// would not move it.
func TestScanUnsettled(t *testing.T) {
	h := home(t, map[string]string{".config/app/settings.json": "{}"})
	idx := filepath.Join(t.TempDir(), "credindex")
	cfg := scanCfg(h, idx)
	cfg.Now = time.Now // everything was just made
	first, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	second, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if second.Read != first.Read || second.Reused != 0 {
		t.Errorf("directories read just after they changed were trusted: read %d then %d, reused %d", first.Read, second.Read, second.Reused)
	}
	third, err := Scan(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if third.Read != 0 {
		t.Errorf("settled directories were read again: %d", third.Read)
	}
}
