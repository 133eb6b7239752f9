package agentinstall

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
)

// ownerChildEnv names the root of the test a child install runs in.
const ownerChildEnv = "AGENTINSTALL_OWNER_ROOT"

// TestOwnerKept runs install as the unprivileged sandboxd-test on a
// settings file of theirs whose group they are not in (root's): the
// mode stays, the content is installed, and the output says the group
// could not be kept, which only root could have done.
func TestOwnerKept(t *testing.T) {
	if root := os.Getenv(ownerChildEnv); root != "" {
		changes, err := Install(agenthook.ClaudeCode, testEnv(root), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			os.Stdout.WriteString("CHANGE " + c.Did + "\n")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run install as sandboxd-test")
	}
	u, err := user.Lookup("sandboxd-test")
	if err != nil {
		t.Skipf("no user sandboxd-test: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	root := t.TempDir()
	for d := root; d != "/tmp" && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	e := testEnv(root)
	settings := filepath.Join(e.ClaudeDir, "settings.json")
	writeTestFile(t, settings, []byte("{}\n"))
	os.Chmod(settings, 0o640)
	for _, p := range []string{e.Home, e.ClaudeDir, settings} {
		if err := os.Chown(p, uid, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary's own directory is closed to other users.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "agentinstall.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestOwnerKept$", "-test.count=1")
	cmd.Dir, cmd.Env = root, []string{ownerChildEnv + "=" + root}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install as sandboxd-test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "CHANGE its owner or group is now yours") {
		t.Errorf("install did not say the group changed:\n%s", out)
	}
	fi, err := os.Stat(settings)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o640 || int(st.Uid) != uid {
		t.Errorf("settings.json: mode %v, owner %d", fi.Mode(), st.Uid)
	}
	if b, _ := os.ReadFile(settings); !strings.Contains(string(b), agenthook.ClaudeShellName) {
		t.Errorf("settings.json was not installed into:\n%s", b)
	}
}
