package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEgressHostsFileLoopback: a name the host's /etc/hosts maps to
// 127.0.0.1, allowed by a rule naming it, is refused like any loopback
// destination the rules do not name: the proxy resolves it through the
// host's resolver (which reads /etc/hosts) and the hard denies check the
// address it got. sandboxd runs in a mount namespace of the test's own
// with its /etc/hosts bound over the host's.
func TestEgressHostsFileLoopback(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace with its own /etc/hosts")
	}
	egNeed(t, "unshare", "setpriv", "curl")
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		name := "hosts-" + randHex(4) + ".test"
		hosts := filepath.Join(e.dir, "hosts")
		e.writeFile(hosts, "127.0.0.1 localhost\n127.0.0.1 "+name+"\n", 0o644)
		pol := egPolicy(t, e, []string{name + ":" + o.port}, nil, nil, "")
		report := filepath.Join(e.mkdir("reports", 0o755), "hosts-"+randHex(4)+".json")
		script := fmt.Sprintf(`curl -s -o /dev/null -w '%%{http_code}' http://%s:%s/`, name, o.port)
		inner := fmt.Sprintf(`mount --bind %q /etc/hosts && exec setpriv --reuid=%d --regid=%d --clear-groups env -i HOME=%q PATH=/usr/local/bin:/usr/bin:/bin %q run --report %q --policy %q -c %q`,
			hosts, e.id.uid, e.id.gid, e.home, binary, report, pol, script)
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", inner)
		cmd.Dir = e.ws
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sandboxd: %v\n%s%s", err, out, stderr.String())
		}
		if !strings.HasPrefix(string(out), "403") {
			t.Errorf("curl got %q, want 403", out)
		}
		o.mustHits(t, 0, result{stdout: string(out)})
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatalf("no report: %v\n%s", err, out)
		}
		var r result
		if err := json.Unmarshal(b, &r.report); err != nil {
			t.Fatal(err)
		}
		egMustDeny(t, r, name+":"+o.port, "hard-deny")
		if bd := egBoundary(r, name+":"+o.port); bd != nil && !strings.Contains(fmt.Sprint(bd["rationale"]), "resolves to 127.0.0.1") {
			t.Errorf("rationale does not name the address: %v", bd["rationale"])
		}
	})
}
