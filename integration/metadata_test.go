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

// metadataListener is python that listens on each ADDR:PORT argument
// after the log and ready paths, appends "ADDR:PORT" to the log for every
// connection it accepts, answers it with a 200 and closes it.
const metadataListener = `
import socket, sys, threading
log, ready = sys.argv[1], sys.argv[2]
lock = threading.Lock()
def serve(spec, s):
    while True:
        c, _ = s.accept()
        with lock, open(log, 'a') as f:
            f.write(spec + '\n')
        try:
            c.settimeout(2)
            c.recv(4096)
            c.sendall(b'HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n')
        except OSError:
            pass
        c.close()
for spec in sys.argv[3:]:
    host, port = spec.rsplit(':', 1)
    host = host.strip('[]')
    s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(64)
    threading.Thread(target=serve, args=(spec, s), daemon=True).start()
open(ready, 'w').close()
threading.Event().wait()
`

// TestEgressMetadataClass: Azure's WireServer (168.63.129.16, a public
// address, and its host agent port 32526) and the EKS Pod Identity Agent
// (169.254.170.23 and fd00:ec2::23) are unreachable from inside, though
// allow rules name them, their ranges and the names that resolve to
// them: by IP literal through the proxy (plain HTTP, CONNECT, SOCKS5) and
// straight (captured), in numeric and IPv4-mapped spellings, and by names
// the host's /etc/hosts maps to them, through the proxy and through the
// run's stub resolver. sandboxd runs in a network namespace of the
// test's own, where those addresses are bound on a dummy interface with
// a listener behind each (nothing on the host is touched); the listeners
// log every connection, and only the control address, which a rule names
// like the others, may appear there.
func TestEgressMetadataClass(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace with the metadata addresses bound")
	}
	egNeed(t, "unshare", "setpriv", "curl", "ip")
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	const control = "10.254.254.2"
	specs := []string{"168.63.129.16:80", "168.63.129.16:32526", "169.254.170.23:80", "[fd00:ec2::23]:80", control + ":80"}
	forEach(t, func(t *testing.T, e *env) {
		hosts := filepath.Join(e.dir, "hosts")
		e.writeFile(hosts, "127.0.0.1 localhost\n168.63.129.16 wire.test\n169.254.170.23 eks.test\nfd00:ec2::23 eks6.test\n"+control+" control.test\n", 0o644)
		pol := egPolicy(t, e, []string{
			"168.63.129.16:80", "168.63.129.16:32526", "168.63.0.0/16:*", "169.254.170.23:80", "[fd00:ec2::23]:80",
			"wire.test:*", "eks.test:*", "eks6.test:*", control + ":80", "control.test:80",
		}, nil, nil, "")
		lib := filepath.Join(e.dir, "listener.py")
		e.writeFile(lib, metadataListener, 0o644)
		log, ready := filepath.Join(e.dir, "connections.log"), filepath.Join(e.dir, "ready")
		report := filepath.Join(e.mkdir("reports", 0o755), "metadata-"+randHex(4)+".json")
		out, errOut := filepath.Join(e.dir, "stdout"), filepath.Join(e.dir, "stderr")
		script := `get() { printf '%s %s\n' "$1" "$(shift; curl -s -m 10 -o /dev/null -w '%{http_code}' "$@")"; }
S="${ALL_PROXY}"
get control-proxy http://10.254.254.2/
get control-capture --noproxy '*' http://10.254.254.2/
get control-name http://control.test/
get ip-proxy http://168.63.129.16/
get ip-connect -p http://168.63.129.16/
get ip-socks -x "$S" http://168.63.129.16/
get ip-capture --noproxy '*' http://168.63.129.16/
get agent-connect -p http://168.63.129.16:32526/
get agent-capture --noproxy '*' http://168.63.129.16:32526/
get decimal-proxy http://2822734096/
get hex-capture --noproxy '*' http://0xa83f8110/
get mapped-proxy 'http://[::ffff:168.63.129.16]/'
get name-proxy http://wire.test/
get name-connect -p http://wire.test:32526/
get name-socks -x "$S" http://wire.test/
get name-capture --noproxy '*' http://wire.test/
get eks-proxy http://169.254.170.23/
get eks-capture --noproxy '*' http://169.254.170.23/
get eks6-proxy 'http://[fd00:ec2::23]/'
get eks6-capture --noproxy '*' 'http://[fd00:ec2::23]/'
get eksname-proxy http://eks.test/
get eks6name-proxy http://eks6.test/
echo END
`
		scriptFile := filepath.Join(e.dir, "script.sh")
		e.writeFile(scriptFile, script, 0o644)
		inner := fmt.Sprintf(`set -e
ip link set lo up
ip link add sbxmd0 type dummy 2>/dev/null || ip link add sbxmd0 type veth peer name sbxmd1
for a in 168.63.129.16 169.254.170.23 %[1]s; do ip addr add $a/32 dev sbxmd0; done
ip -6 addr add fd00:ec2::23/128 dev sbxmd0 nodad
ip link set sbxmd0 up
%[2]q %[3]q %[4]q %[5]q %[6]s &
listener=$!
i=0; while [ ! -e %[5]q ]; do i=$((i+1)); [ $i -lt 200 ] || exit 97; sleep 0.05; done
mount --bind %[7]q /etc/hosts
setpriv --reuid=%[8]d --regid=%[9]d --clear-groups env -i HOME=%[10]q PATH=/usr/local/bin:/usr/bin:/bin %[11]q run --report %[12]q --policy %[13]q -c "$(cat %[14]q)" >%[15]q 2>%[16]q || true
kill $listener`, control, python, lib, log, ready, strings.Join(specs, " "), hosts,
			e.id.uid, e.id.gid, e.home, binary, report, pol, scriptFile, out, errOut)
		cmd := exec.Command("unshare", "-n", "-m", "--propagation", "private", "sh", "-c", inner)
		cmd.Dir = e.ws
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the test's namespace: %v\n%s", err, b)
		}
		stdout, _ := os.ReadFile(out)
		stderr, _ := os.ReadFile(errOut)
		r := result{stdout: string(stdout), stderr: string(stderr)}
		netRan(t, r)
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatalf("no report: %v\n%s", err, r)
		}
		if err := json.Unmarshal(b, &r.report); err != nil {
			t.Fatal(err)
		}
		logged, _ := os.ReadFile(log)
		var reached []string
		for _, line := range strings.Split(strings.TrimSpace(string(logged)), "\n") {
			if line != "" && line != control+":80" {
				reached = append(reached, line)
			}
		}
		if len(reached) > 0 {
			t.Errorf("metadata listeners were reached %d times: %v\n%s", len(reached), reached, r)
		}
		// The control proves the proxy dials from this namespace and the
		// capture works: a rule opens an address it names.
		if !strings.Contains(string(logged), control+":80") {
			t.Fatalf("the control address was never reached (the test proves nothing)\n%s\n%s", logged, r)
		}
		for _, c := range []string{"control-proxy", "control-capture", "control-name"} {
			if !strings.Contains(r.stdout, c+" 200\n") {
				t.Errorf("%s was not served: %q\n%s", c, egLine(r.stdout, c+" "), r)
			}
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if !strings.HasPrefix(line, "control-") && strings.HasSuffix(line, " 200") {
				t.Errorf("served from inside: %s", line)
			}
		}
		for _, dest := range []string{"168.63.129.16:80", "168.63.129.16:32526", "wire.test:80", "wire.test:32526",
			"169.254.170.23:80", "[fd00:ec2::23]:80", "eks.test:80", "eks6.test:80"} {
			egMustDeny(t, r, dest, "hard-deny")
			if bd := egBoundary(r, dest); bd != nil && !strings.Contains(fmt.Sprint(bd["rationale"]), "cloud metadata endpoint") {
				t.Errorf("%s: rationale %q does not say it is a metadata endpoint", dest, bd["rationale"])
			}
		}
	})
}
