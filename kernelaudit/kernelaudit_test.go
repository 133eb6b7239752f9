package kernelaudit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/sandboxd/sandboxd/landlock"
	"golang.org/x/sys/unix"
)

const childEnv = "SANDBOXD_KAUDIT_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "crash":
		// Acquire and die without releasing.
		if _, err := Acquire(DefaultDir); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	case "deny":
		os.Exit(denyChild(os.Getenv("SANDBOXD_KAUDIT_TEST_PATH")))
	}
	os.Exit(m.Run())
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if _, err := Acquire(filepath.Join(t.TempDir(), "k")); !errors.Is(err, ErrPermission) {
			t.Fatalf("unprivileged Acquire: %v, want ErrPermission", err)
		}
		t.Skip("the rest needs root (CAP_AUDIT_CONTROL); the unprivileged refusal is checked above")
	}
}

// othersHold reports whether holders outside this test are registered
// (another sandboxd run), in which case nothing is restored yet.
func othersHold() bool { return pruneHolders(DefaultDir) > 0 }

// settled returns the current audit setting when no holder is left (read
// under the holders' lock, so none can start meanwhile); ok is false
// while others hold it (the last of them restores it).
func settled(t *testing.T) (Status, bool) {
	t.Helper()
	unlock, err := lockDir(DefaultDir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if pruneHolders(DefaultDir) > 0 {
		return Status{}, false
	}
	st, err := CurrentStatus()
	if err != nil {
		t.Fatal(err)
	}
	return st, true
}

// original is the machine's audit setting as it was before any holder
// changed it: the state file's record while holders (another test
// package running sandboxd, say) keep it changed, else the current one.
// Read under the holders' lock, so no holder changes it meanwhile.
func original(t *testing.T) Status {
	t.Helper()
	if err := os.MkdirAll(DefaultDir, 0o700); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockDir(DefaultDir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	st, err := CurrentStatus()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(DefaultDir, "state.json"))
	if err != nil {
		return st
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Mask&maskEnabled != 0 {
		st.Enabled = s.Enabled
	}
	if s.Mask&maskBacklogLimit != 0 {
		st.BacklogLimit = s.BacklogLimit
	}
	return st
}

func TestAcquireAndRestore(t *testing.T) {
	needRoot(t)
	before := original(t)
	h1, err := Acquire(DefaultDir)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := Acquire(DefaultDir)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := CurrentStatus()
	if st.Enabled == 0 || st.BacklogLimit < MinBacklog {
		t.Fatalf("held: enabled=%d backlog=%d", st.Enabled, st.BacklogLimit)
	}
	if err := h1.Release(); err != nil {
		t.Fatal(err)
	}
	if st, _ := CurrentStatus(); st.Enabled == 0 {
		t.Fatal("released while another holder remains")
	}
	if err := h2.Release(); err != nil {
		t.Fatal(err)
	}
	after, ok := settled(t)
	if !ok {
		return
	}
	if after.Enabled != before.Enabled || after.BacklogLimit != before.BacklogLimit {
		t.Fatalf("not restored: before enabled=%d backlog=%d, after enabled=%d backlog=%d",
			before.Enabled, before.BacklogLimit, after.Enabled, after.BacklogLimit)
	}
}

func TestCrashedHolderIsRestored(t *testing.T) {
	needRoot(t)
	before := original(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=crash")
	if err := cmd.Run(); err != nil {
		t.Fatalf("crashing holder: %v", err)
	}
	// The dead holder's file is left behind; the next holder prunes it
	// and the last release restores.
	h, err := Acquire(DefaultDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	after, ok := settled(t)
	if !ok {
		return
	}
	if after.Enabled != before.Enabled || after.BacklogLimit != before.BacklogLimit {
		t.Fatalf("not restored after a crash: before %d/%d after %d/%d", before.Enabled, before.BacklogLimit, after.Enabled, after.BacklogLimit)
	}
	if _, err := os.Stat(filepath.Join(DefaultDir, "state.json")); err == nil && !othersHold() {
		t.Fatal("state file left behind")
	}
}

// Recover puts back, at once, what a holder that died left changed: no
// other holder has to come and go first.
func TestRecoverAfterCrash(t *testing.T) {
	needRoot(t)
	before := original(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=crash")
	if err := cmd.Run(); err != nil {
		t.Fatalf("crashing holder: %v", err)
	}
	changed, _ := os.Stat(filepath.Join(DefaultDir, "state.json"))
	t.Logf("before: enabled=%d backlog=%d; the crashed holder left a state file: %v", before.Enabled, before.BacklogLimit, changed != nil)
	rec, err := Recover(DefaultDir)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Holders > 0 {
		t.Skipf("%d other holders keep kernel audit changed (another sandboxd runs): the last of them restores it", rec.Holders)
	}
	if rec.Restored != (changed != nil) {
		t.Errorf("Recover said restored=%v; a state file was there: %v", rec.Restored, changed != nil)
	}
	after, ok := settled(t)
	if !ok {
		t.Skip("another holder came meanwhile")
	}
	if after.Enabled != before.Enabled || after.BacklogLimit != before.BacklogLimit {
		t.Fatalf("not restored: before %d/%d after %d/%d", before.Enabled, before.BacklogLimit, after.Enabled, after.BacklogLimit)
	}
	if _, err := os.Stat(filepath.Join(DefaultDir, "state.json")); err == nil && !othersHold() {
		t.Fatal("state file left behind")
	}
	// Nothing recorded: nothing to do, and no kernel round trip.
	if rec, err := Recover(filepath.Join(t.TempDir(), "none")); err != nil || rec != (Recovery{}) {
		t.Fatalf("Recover with no state: %+v %v", rec, err)
	}
}

// A Landlock denial reaches the listener as a parsable record.
func TestListenerSeesLandlockDenial(t *testing.T) {
	needRoot(t)
	sup, err := landlock.Probe()
	if err != nil || !sup.LogFlags {
		t.Fatalf("needs Landlock ABI 7 (logging): %v", err)
	}
	h, err := Acquire(DefaultDir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	l, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	target := filepath.Join(t.TempDir(), "a secret ü")
	os.WriteFile(target, []byte("x"), 0o600)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=deny", "SANDBOXD_KAUDIT_TEST_PATH="+target)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v %s", err, out)
	}
	found := make(chan landlock.Record, 1)
	go func() {
		for {
			typ, text, err := l.Next()
			if err != nil {
				if errors.Is(err, ErrOverrun) {
					continue
				}
				return
			}
			if r, err := landlock.ParseRecord(typ, text); err == nil && r.Path == target {
				found <- r
				return
			}
		}
	}()
	select {
	case r := <-found:
		if len(r.Blockers) != 1 || r.Blockers[0] != "fs.read_file" || r.Domain == "" {
			t.Fatalf("record: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no record for the denied read")
	}
}

func denyChild(path string) int {
	attr := llsys.RulesetAttr{HandledAccessFS: llsys.AccessFSReadFile}
	fd, err := llsys.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return 4
	}
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	if err := llsys.LandlockRestrictSelf(fd, 0); err != nil {
		return 5
	}
	_, err = os.ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		return 6
	}
	return 0
}

func datagram(typ uint16, text string) []byte {
	b := make([]byte, 16+len(text))
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	copy(b[16:], text)
	return b
}

// Audit records are not padded to netlink's 4-byte alignment; a record
// whose length is not a multiple of 4 must still be read (it was lost
// when the standard parser was used).
func TestSplitDatagramUnaligned(t *testing.T) {
	for _, text := range []string{"a", "ab", "abc", "abcd", "audit(1.2:3): domain=1 blockers=fs.read_file path=\"/x\""} {
		got := splitDatagram(datagram(1423, text))
		if len(got) != 1 || got[0].typ != 1423 || got[0].text != text {
			t.Errorf("%q: %+v", text, got)
		}
	}
	two := append(datagram(1423, "abcd"), datagram(1424, "efgh")...)
	if got := splitDatagram(two); len(got) != 2 || got[1].typ != 1424 || got[1].text != "efgh" {
		t.Errorf("two records: %+v", got)
	}
}

func FuzzSplitDatagram(f *testing.F) {
	f.Add(datagram(1423, "abc"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, r := range splitDatagram(b) {
			if len(r.text) > len(b) {
				t.Fatal("record longer than the datagram")
			}
		}
	})
}
