package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// refusedScript meets each class of calls the sandbox refuses by design
// (netlink twice) and fails, as a command that met them would.
const refusedScript = `ip addr; echo "ip=$?"
hostname -I; echo "hostname=$?"
unshare -U true; echo "unshare=$?"
python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); print("ptrace", l.ptrace(0, 0, 0, 0), ctypes.get_errno())'
python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)' 2>&1 | tail -1
exit 3`

// refusedHints are the words of each class's line on stderr.
var refusedHints = map[string]string{
	"netlink":    "sandboxd: refused a netlink socket",
	"namespace":  "sandboxd: refused a new namespace",
	"ptrace":     "sandboxd: refused tracing or reading another process",
	"raw_socket": "sandboxd: refused a raw or packet socket",
}

// TestRefusedByDesign: ip addr, hostname -I, unshare, ptrace and a raw
// socket fail exactly as they did before sandboxd explained them (the
// same output as with --detect off, which leaves the filter to answer);
// stderr names each class once, with why, and the report lists each
// with a count under refused, not as a boundary. A command that
// succeeds is not told, only reported, and an everyday one neither.
func TestRefusedByDesign(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"ip", "hostname", "unshare", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (iproute2, hostname, util-linux, python3): %v", tool, err)
		}
	}
	forEach(t, func(t *testing.T, e *env) {
		r := e.sh(refusedScript)
		off := e.sandboxd("run", "--detect", "off", "-c", refusedScript)
		if r.code != 3 || off.code != 3 {
			t.Fatalf("exit %d and %d (--detect off), want 3\n%s\n--- detect off\n%s", r.code, off.code, r, off)
		}
		// The command's own failures are unchanged.
		for _, want := range []string{"ip=", "hostname=", "unshare=1", "ptrace -1 1", "PermissionError"} {
			if !strings.Contains(r.stdout+r.stderr, want) {
				t.Errorf("no %q in the output\n%s", want, r)
			}
		}
		for _, ok := range []string{"ip=0", "hostname=0"} {
			if strings.Contains(r.stdout, ok) {
				t.Errorf("%s: the refused call succeeded\n%s", ok, r)
			}
		}
		if r.stdout != off.stdout || commandLines(r.stderr) != commandLines(off.stderr) {
			t.Errorf("the command saw a difference\n%s\n--- detect off\n%s", r, off)
		}
		// Once per class on stderr, and nothing else about them.
		if n := strings.Count(r.stderr, "sandboxd: refused "); n != len(refusedHints) {
			t.Errorf("%d refused lines, want %d\n%s", n, len(refusedHints), r)
		}
		for class, hint := range refusedHints {
			if n := strings.Count(r.stderr, hint); n != 1 {
				t.Errorf("%s: %d lines %q, want 1\n%s", class, n, hint, r)
			}
		}
		if strings.Contains(off.stderr, "sandboxd: refused") || off.report["refused"] != nil {
			t.Errorf("--detect off explained a refusal\n%s\nreport refused: %v", off, off.report["refused"])
		}
		got := refusedCounts(t, r)
		for class, min := range map[string]int{"netlink": 2, "namespace": 1, "ptrace": 1, "raw_socket": 1} {
			if got[class] < min {
				t.Errorf("report: %s refused %d times, want at least %d (%v)", class, got[class], min, r.report["refused"])
			}
		}
		if len(got) != len(refusedHints) {
			t.Errorf("report refused %v, want the classes %v", got, refusedHints)
		}
		if b, _ := r.report["boundaries"].([]any); len(b) != 0 {
			t.Errorf("boundaries %v, want none", b)
		}

		// A command that carries on after a refusal: reported, not told.
		ok := e.sh("ip addr 2>/dev/null || echo fine")
		if ok.code != 0 || strings.Contains(ok.stderr, "sandboxd: refused") {
			t.Errorf("a successful command was told\n%s", ok)
		}
		if got := refusedCounts(t, ok); got["netlink"] != 1 || len(got) != 1 {
			t.Errorf("report refused %v, want netlink once", got)
		}
		// An everyday command: nothing at all.
		plain := e.sh("true")
		if plain.code != 0 || strings.Contains(plain.stderr, "refused") || plain.report["refused"] != nil {
			t.Errorf("true was refused something\n%s\nreport refused: %v", plain, plain.report["refused"])
		}
	})
}

// commandLines are stderr's lines that are the command's, not sandboxd's.
func commandLines(stderr string) string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "sandboxd: ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// refusedCounts reads the report's refused: class -> count, each entry
// checked to say what and why.
func refusedCounts(t *testing.T, r result) map[string]int {
	t.Helper()
	got := map[string]int{}
	list, _ := r.report["refused"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		class, _ := m["class"].(string)
		n, _ := m["count"].(float64)
		if what, _ := m["what"].(string); what == "" {
			t.Errorf("refused %v says not what", m)
		}
		if why, _ := m["why"].(string); why == "" {
			t.Errorf("refused %v says not why", m)
		}
		got[class] = int(n)
	}
	return got
}
