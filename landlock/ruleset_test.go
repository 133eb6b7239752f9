package landlock

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Restriction is permanent, so enforcement runs in a child copy of the
// test binary (the go-landlock pattern).
const childEnv = "SANDBOXD_LANDLOCK_TEST_CHILD"

type childSpec struct {
	Roots    []string `json:"roots"`
	Deny     []string `json:"deny"`
	Writable []string `json:"writable"`
	Carved   bool     `json:"carved"`
	Probe    []string `json:"probe"` // paths to read
	Write    []string `json:"write"` // paths to create
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

func child(raw string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return 3
	}
	sup, err := Probe()
	if err != nil {
		return 4
	}
	rs, err := New(sup, Options{})
	if err != nil {
		return 5
	}
	// The carve-out's own answer, for each probe, to compare with the
	// kernel's.
	c := NewCarveout(ResolveRoots(s.Roots), s.Deny, s.Carved)
	model := map[string]bool{}
	for _, p := range s.Probe {
		access := AccessReadFile
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			access = AccessReadDir
		}
		real, err := filepath.EvalSymlinks(p)
		model[p] = err == nil && c.Grants(real, access)
	}
	// psx (which restricts every thread) lists /proc/self/task while it
	// works, so the child must keep reading /proc.
	if err := rs.AddPath("/proc", ReadAccess); err != nil {
		return 10
	}
	if err := rs.Carve(c); err != nil {
		os.Stderr.WriteString(err.Error())
		return 6
	}
	for _, w := range s.Writable {
		if err := rs.AddPath(w, sup.FS); err != nil {
			return 7
		}
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 8
	}
	if err := Restrict(rs.FD(), 0); err != nil {
		os.Stderr.WriteString(err.Error())
		return 9
	}
	out := map[string]bool{}
	for _, p := range s.Probe {
		_, err := os.ReadFile(p)
		if err != nil {
			_, err = os.ReadDir(p)
		}
		out["read "+p] = err == nil
		out["grants "+p] = model[p]
	}
	for _, p := range s.Write {
		out["write "+p] = os.WriteFile(p, []byte("x"), 0o644) == nil
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

func runChild(t *testing.T, s childSpec) map[string]bool {
	t.Helper()
	if _, err := Probe(); err != nil {
		t.Fatalf("landlock is required for these tests: %v", err)
	}
	raw, _ := json.Marshal(s)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	var got map[string]bool
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	// Carveout.Grants and the enforced ruleset must agree on every
	// probe that no writable root holds.
	for _, p := range s.Probe {
		if underAny(p, s.Writable) {
			continue
		}
		if got["read "+p] != got["grants "+p] {
			t.Errorf("%s: the kernel allowed=%v, Carveout.Grants=%v", p, got["read "+p], got["grants "+p])
		}
	}
	return got
}

func tree(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCarveDeniesSecretsOnly(t *testing.T) {
	root := tree(t, "home/.ssh/id_rsa", "home/.bashrc", "home/proj/main.go",
		"home/.config/gh/hosts.yml", "home/.config/git/config",
		"etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_config", "etc/passwd", "ws/a")
	j := func(p string) string { return filepath.Join(root, p) }
	got := runChild(t, childSpec{
		Roots:    []string{root},
		Deny:     []string{j("home/.ssh"), j("home/.config/gh"), j("etc/ssh/ssh_host_*_key")},
		Writable: []string{j("ws")},
		Probe: []string{j("home/.ssh/id_rsa"), j("home/.config/gh/hosts.yml"),
			j("etc/ssh/ssh_host_ed25519_key"), j("home/.bashrc"), j("home/proj/main.go"),
			j("home/.config/git/config"), j("etc/ssh/ssh_config"), j("etc/passwd"), j("home")},
		Write: []string{j("ws/new"), j("home/new"), j("etc/new")},
	})
	want := map[string]bool{
		"read " + j("home/.ssh/id_rsa"):             false,
		"read " + j("home/.config/gh/hosts.yml"):    false,
		"read " + j("etc/ssh/ssh_host_ed25519_key"): false,
		"read " + j("home/.bashrc"):                 true,
		"read " + j("home/proj/main.go"):            true,
		"read " + j("home/.config/git/config"):      true,
		"read " + j("etc/ssh/ssh_config"):           true,
		"read " + j("etc/passwd"):                   true,
		"read " + j("home"):                         false, // carved directories are not listable without carvedAccess
		"write " + j("ws/new"):                      true,
		"write " + j("home/new"):                    false,
		"write " + j("etc/new"):                     false,
	}
	check(t, got, want)
}

func TestCarvedListing(t *testing.T) {
	root := tree(t, "home/.ssh/id_rsa", "home/x")
	j := func(p string) string { return filepath.Join(root, p) }
	got := runChild(t, childSpec{
		Roots: []string{root}, Deny: []string{j("home/.ssh")}, Carved: true,
		Probe: []string{j("home"), j("home/.ssh"), j("home/.ssh/id_rsa")},
	})
	check(t, got, map[string]bool{
		"read " + j("home"):             true,
		"read " + j("home/.ssh"):        true,  // names are listable...
		"read " + j("home/.ssh/id_rsa"): false, // ...contents are not
	})
}

func TestCarveStrictAllowList(t *testing.T) {
	root := tree(t, "home/go/pkg/x", "home/.cargo/credentials.toml", "home/.cargo/bin/cargo", "home/notes")
	j := func(p string) string { return filepath.Join(root, p) }
	got := runChild(t, childSpec{
		Roots: []string{root, j("home/go"), j("home/.cargo"), j("home/.missing")},
		Deny:  []string{j("home"), j("home/.cargo/credentials.toml"), j("home/.missing/secret")},
		Probe: []string{j("home/go/pkg/x"), j("home/.cargo/bin/cargo"), j("home/.cargo/credentials.toml"), j("home/notes")},
	})
	check(t, got, map[string]bool{
		"read " + j("home/go/pkg/x"):                true,
		"read " + j("home/.cargo/bin/cargo"):        true,
		"read " + j("home/.cargo/credentials.toml"): false,
		"read " + j("home/notes"):                   false,
	})
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		root string
		deny []string
		want bool
	}{
		{"/home/u/ws", []string{"/home/u/.ssh"}, false},
		{"/home/u", []string{"/home/u/.ssh"}, true},
		{"/home/u/.ssh", []string{"/home/u/.ssh"}, true},
		{"/home/u/.s", []string{"/home/u/.ssh"}, false},
	} {
		if _, got := Covers(tc.root, tc.deny); got != tc.want {
			t.Errorf("Covers(%s, %v) = %v, want %v", tc.root, tc.deny, got, tc.want)
		}
	}
}

func underAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

func check(t *testing.T, got, want map[string]bool) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: allowed=%v, want %v", k, got[k], want[k])
		}
	}
}
