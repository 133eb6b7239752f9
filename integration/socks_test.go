package integration

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The SOCKS5 endpoint: OpenBSD nc -X 5, and ssh and git over ssh through
// the GIT_SSH_COMMAND sandboxd sets, to a test sshd off loopback.

// capSSHD is a test sshd on addr's host (a free port), letting the env's
// identity in with a key of its own; it serves a bare repository.
type capSSHD struct {
	port, login, key, repo string
}

func capNewSSHD(t *testing.T, e *env, host string) *capSSHD {
	t.Helper()
	egNeed(t, "ssh", "ssh-keygen", "git")
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, err = os.Stat("/usr/sbin/sshd"); err != nil {
			t.Skip("sshd is not installed (openssh-server)")
		}
		sshd = "/usr/sbin/sshd"
	}
	// The remote account is root whoever connects: sshd refuses a
	// locked account (the test user's) without PAM.
	login := "root"
	dir := e.mkdir("sshd-"+randHex(3), 0o755)
	os.MkdirAll("/run/sshd", 0o755)
	keygen := func(path string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	keygen(filepath.Join(dir, "host"))
	// The client key in the workspace: readable inside in every mode.
	key := filepath.Join(e.ws, ".test-ssh-key")
	keygen(key)
	e.chown(key)
	e.chown(key + ".pub")
	pub, _ := os.ReadFile(key + ".pub")
	auth := filepath.Join(dir, "authorized_keys")
	os.WriteFile(auth, pub, 0o644)
	// The repository, the identity's own (git refuses another user's).
	work := filepath.Join(dir, "work")
	repo := filepath.Join(dir, "repo.git")
	os.MkdirAll(work, 0o755)
	os.WriteFile(filepath.Join(work, "hello.txt"), []byte("hello over ssh\n"), 0o644)
	egHostGit(t, work, "init", "-q")
	egHostGit(t, work, "add", ".")
	egHostGit(t, work, "commit", "-q", "-m", "first")
	egHostGit(t, dir, "clone", "-q", "--bare", work, repo)
	// Served by root: git's safe.directory wants it root's.
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	cfg := filepath.Join(dir, "sshd_config")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`ListenAddress %s:%s
HostKey %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
LogLevel ERROR
`, host, port, filepath.Join(dir, "host"), auth)), 0o644)
	cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
	var logBuf strings.Builder
	cmd.Stderr = &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatalf("sshd: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatalf("sshd did not listen: %s", logBuf.String())
		}
		time.Sleep(30 * time.Millisecond)
	}
	return &capSSHD{port: port, login: login, key: key, repo: repo}
}

// sshOpts are the client options the tests add to sandboxd's
// GIT_SSH_COMMAND (which carries the ProxyCommand).
func (s *capSSHD) sshOpts() string {
	return "-i " + s.key + " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o ConnectTimeout=10 -p " + s.port
}

// TestSOCKSTools: with capture off (so the SOCKS5 endpoint is the only
// way for them), OpenBSD nc -X 5, ssh and git over ssh reach an allowed
// name through $ALL_PROXY and sandboxd's GIT_SSH_COMMAND, and are
// refused (with a boundary) for an unlisted name, which the DNS server
// the proxy asks never hears of.
func TestSOCKSTools(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	egNeed(t, "nc.openbsd")
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		sshd := capNewSSHD(t, e, priv)
		o := egNewOrigin(t, priv+":0", false, nil)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs(priv), true })
		pol := egPolicy(t, e, []string{"git.test:" + sshd.port, priv + ":" + sshd.port, "web.test:" + o.port, o.addr}, nil, nil,
			"[network]\ncapture = false\nresolver = \""+dns.addr+"\"")
		clone := filepath.Join(e.ws, "cloned")
		r := e.sandboxd("run", "--policy", pol, "--retries", "0", "-c", fmt.Sprintf(`
case "$ALL_PROXY" in socks5h://127.0.0.1:*) echo ALL_PROXY-OK;; esac
SOCKS=${ALL_PROXY#socks5h://}
printf 'GET /nc HTTP/1.0\r\nHost: web.test\r\n\r\n' | nc.openbsd -w 10 -X 5 -x $SOCKS web.test %[1]s | head -1 | sed 's/^/NC /'
printf 'GET /nc2 HTTP/1.0\r\n\r\n' | nc.openbsd -w 10 -X 5 -x $SOCKS unlisted.test %[1]s; echo "NC-UNLISTED rc=$?"
echo "SSH $(eval "$GIT_SSH_COMMAND %[2]s %[3]s@git.test echo over-ssh")"
eval "$GIT_SSH_COMMAND %[2]s %[3]s@unlisted.test echo no" 2>/dev/null; echo "SSH-UNLISTED rc=$?"
GIT_SSH_COMMAND="$GIT_SSH_COMMAND %[2]s" git clone -q ssh://%[3]s@git.test:%[4]s%[5]s %[6]s && echo "GIT $(cat %[6]s/hello.txt)"
echo END
`, o.port, sshd.sshOpts(), sshd.login, sshd.port, sshd.repo, clone))
		netRan(t, r)
		for _, want := range []string{"ALL_PROXY-OK", "NC HTTP/1.0 200 OK", "SSH over-ssh", "GIT hello over ssh"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q\n%s", want, r)
			}
		}
		if strings.Contains(r.stdout, "NC-UNLISTED rc=0") || strings.Contains(r.stdout, "SSH-UNLISTED rc=0") {
			t.Errorf("an unlisted name was reached\n%s", r)
		}
		if got, _ := os.ReadFile(filepath.Join(clone, "hello.txt")); string(got) != "hello over ssh\n" {
			t.Errorf("the clone did not reach the workspace: %q", got)
		}
		o.mustHits(t, 1, r)
		if dns.askedAny("unlisted") {
			t.Errorf("the DNS server was asked about the unlisted name: %v", dns.queries())
		}
		egMustAllow(t, r, "git.test:"+sshd.port, 2)
		egMustAllow(t, r, "web.test:"+o.port, 1)
		egMustDeny(t, r, "unlisted.test:"+o.port)
		egMustDeny(t, r, "unlisted.test:"+sshd.port)
	})
}

// TestCaptureSSH: with capture, plain ssh (no ProxyCommand, no proxy
// variable) reaches an allowed name: its connect is captured and decided.
func TestCaptureSSH(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		sshd := capNewSSHD(t, e, priv)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs(priv), true })
		pol := egPolicy(t, e, []string{"git.test:" + sshd.port, priv + ":" + sshd.port}, nil, nil, "[network]\nresolver = \""+dns.addr+"\"")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf("echo \"SSH $(ssh %s %s@git.test echo captured-ssh)\"\necho END\n", sshd.sshOpts(), sshd.login))
		netRan(t, r)
		if !strings.Contains(r.stdout, "SSH captured-ssh\n") {
			t.Errorf("ssh did not reach the allowed name\n%s", r)
		}
		egMustAllow(t, r, "git.test:"+sshd.port, 1)
	})
}
