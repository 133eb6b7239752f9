// Command egress measures the egress proxy next to a direct connection,
// in one run on one machine: bulk throughput (curl fetching -mib MiB from
// a loopback origin, bare on the host and inside `sandboxd run` through
// its proxy, both plain HTTP forwarding and a CONNECT tunnel), the latency
// of a new connection (a CONNECT to an echo origin and one byte there
// and back, against a direct connect and one byte), and many tunnels
// open at once (count, errors, sandboxd's peak memory). It prints
// Markdown for docs/BENCHMARKS.md.
//
//	make build && go run ./bench/egress [-sandboxd bin/sandboxd] [-rounds 5] [-mib 1024] [-conns 500] [-tunnels 1000]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/scratch"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
)

func main() {
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	rounds := flag.Int("rounds", 5, "throughput rounds (interleaved)")
	mib := flag.Int("mib", 1024, "MiB per throughput transfer")
	conns := flag.Int("conns", 500, "sequential new connections for the latency figure")
	tunnels := flag.Int("tunnels", 1000, "tunnels held open at once")
	flag.Parse()
	if err := run(*bin, *rounds, *mib, *conns, *tunnels); err != nil {
		fmt.Fprintln(os.Stderr, "egress:", err)
		os.Exit(1)
	}
}

// bench is one run's origins, workspace and policy.
type bench struct {
	bin, ws, policy  string
	httpURL, echoAdr string
}

func run(bin string, rounds, mib, conns, tunnels int) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	ws, done, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer done()
	httpAddr, err := serveBytes()
	if err != nil {
		return err
	}
	echoAddr, err := serveEcho("127.0.0.1")
	if err != nil {
		return err
	}
	b := &bench{bin: bin, ws: ws, httpURL: "http://" + httpAddr, echoAdr: echoAddr,
		policy: filepath.Join(ws, ".bench-policy.toml")}
	pol := fmt.Sprintf("[boundaries]\nallow = [%q, %q]\n[network]\nmax_connections = %d\n",
		"net connect "+httpAddr, "net connect "+echoAddr, max(tunnels+64, 2048))
	if err := os.WriteFile(b.policy, []byte(pol), 0o644); err != nil {
		return err
	}
	fmt.Printf("## Egress (%s)\n\n", time.Now().UTC().Format("2006-01-02"))
	if err := b.throughput(rounds, mib); err != nil {
		return err
	}
	if err := b.latency(conns); err != nil {
		return err
	}
	if err := b.manyTunnels(tunnels); err != nil {
		return err
	}
	return b.capture(conns, tunnels)
}

// serveBytes serves /bytes?n=N: N zero bytes.
func serveBytes() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	zero := make([]byte, 1<<20)
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(zero)))
			if _, err := w.Write(zero[:k]); err != nil {
				return
			}
			n -= k
		}
	}))
	return ln.Addr().String(), nil
}

// serveEcho echoes every connection's bytes back, on a port of addr.
func serveEcho(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		return "", err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String(), nil
}

// sandboxed runs a shell command in sandboxd under the bench policy.
func (b *bench) sandboxed(script string) (string, error) {
	cmd := exec.Command(b.bin, "run", "--policy", b.policy, "--", "bash", "-c", script)
	cmd.Dir = b.ws
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("sandboxd: %v: %s", err, errb.String())
	}
	return out.String(), nil
}

func bare(script string) (string, error) {
	out, err := exec.Command("bash", "-c", script).Output()
	return string(out), err
}

// throughput fetches mib MiB with curl three ways per round.
func (b *bench) throughput(rounds, mib int) error {
	url := fmt.Sprintf("%s/bytes?n=%d", b.httpURL, int64(mib)<<20)
	curl := "curl -sS -o /dev/null -w '%{speed_download}\\n' "
	ways := []struct {
		name string
		do   func() (string, error)
		mbs  []float64
	}{
		{name: "direct (bare curl on the host)", do: func() (string, error) { return bare(curl + "--noproxy '*' " + url) }},
		{name: "sandboxd, plain HTTP through the proxy", do: func() (string, error) { return b.sandboxed(curl + url) }},
		{name: "sandboxd, CONNECT tunnel (curl -p)", do: func() (string, error) { return b.sandboxed(curl + "-p " + url) }},
	}
	for r := 0; r < rounds; r++ {
		for i := range ways {
			out, err := ways[i].do()
			if err != nil {
				return fmt.Errorf("%s: %w", ways[i].name, err)
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
			if err != nil {
				return fmt.Errorf("%s: curl said %q", ways[i].name, out)
			}
			ways[i].mbs = append(ways[i].mbs, v/1e6)
		}
	}
	fmt.Printf("### Throughput: %d MiB from a loopback origin, curl, %d interleaved rounds\n\n", mib, rounds)
	fmt.Println("| way | median MB/s | min | max | median / direct |")
	fmt.Println("|---|---|---|---|---|")
	base := median(ways[0].mbs)
	for _, w := range ways {
		m := median(w.mbs)
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.2f |\n", w.name, m, minf(w.mbs), maxf(w.mbs), m/base)
	}
	fmt.Println()
	return nil
}

// latencyPy makes n new connections one after another, each either a
// direct connect to the echo origin or a CONNECT through $HTTP_PROXY to
// it, sends one byte and waits for it back; it prints each in µs.
const latencyPy = `
import base64, os, socket, sys, time, urllib.parse
n, target, via = int(sys.argv[1]), sys.argv[2], sys.argv[3]
host, port = target.rsplit(':', 1)
if via in ('proxy', 'proxy-name'):
    u = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
    auth = base64.b64encode(f'{u.username}:{u.password}'.encode()).decode()
    where = (u.hostname, u.port)
else:
    where = (host, int(port))
out = []
for _ in range(n):
    t = time.perf_counter_ns()
    s = socket.create_connection(where)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if via in ('proxy', 'proxy-name'):
        s.sendall(f'CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Basic {auth}\r\n\r\n'.encode())
        head = b''
        while b'\r\n\r\n' not in head:
            head += s.recv(4096)
        assert head.startswith(b'HTTP/1.1 200'), head
    s.sendall(b'x')
    assert s.recv(1) == b'x'
    out.append((time.perf_counter_ns() - t) // 1000)
    s.close()
print(' '.join(map(str, out)))
`

// latency compares new connections direct and through the proxy.
func (b *bench) latency(n int) error {
	py := filepath.Join(b.ws, ".latency.py")
	if err := os.WriteFile(py, []byte(latencyPy), 0o644); err != nil {
		return err
	}
	args := fmt.Sprintf("python3 %s %d %s ", py, n, b.echoAdr)
	direct, err := bare(args + "direct")
	if err != nil {
		return fmt.Errorf("direct latency: %w", err)
	}
	proxied, err := b.sandboxed(args + "proxy")
	if err != nil {
		return fmt.Errorf("proxied latency: %w", err)
	}
	d, p := durations(direct), durations(proxied)
	fmt.Printf("### A new connection: connect, one byte there and back (python3, %d sequential)\n\n", n)
	fmt.Println("| way | p50 | p99 |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| direct connect (host) | %v | %v |\n", stats.Pct(d, 50), stats.Pct(d, 99))
	fmt.Printf("| CONNECT through the run's proxy (inside sandboxd) | %v | %v |\n", stats.Pct(p, 50), stats.Pct(p, 99))
	fmt.Printf("| added by the proxy | %v | %v |\n\n", stats.Pct(p, 50)-stats.Pct(d, 50), stats.Pct(p, 99)-stats.Pct(d, 99))
	return nil
}

// tunnelsPy opens n CONNECT tunnels to the echo origin at once (or, with
// a third argument "capture", n connections straight to it), then sends
// one byte through each and waits for it back.
const tunnelsPy = `
import base64, os, resource, socket, sys, urllib.parse
from concurrent.futures import ThreadPoolExecutor
n, target = int(sys.argv[1]), sys.argv[2]
captured = len(sys.argv) > 3 and sys.argv[3] == 'capture'
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
u = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
auth = base64.b64encode(f'{u.username}:{u.password}'.encode()).decode()
def open_one(_):
    if captured:
        host, port = target.rsplit(':', 1)
        return socket.create_connection((host, int(port)), timeout=30)
    s = socket.create_connection((u.hostname, u.port), timeout=30)
    s.sendall(f'CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Basic {auth}\r\n\r\n'.encode())
    head = b''
    while b'\r\n\r\n' not in head:
        head += s.recv(4096)
    if not head.startswith(b'HTTP/1.1 200'):
        raise RuntimeError(head[:40])
    return s
errors, socks = 0, []
with ThreadPoolExecutor(64) as ex:
    for f in [ex.submit(open_one, i) for i in range(n)]:
        try:
            socks.append(f.result())
        except Exception:
            errors += 1
for s in socks:
    s.sendall(b'y')
for s in socks:
    try:
        if s.recv(1) != b'y':
            errors += 1
    except Exception:
        errors += 1
print(len(socks), errors)
`

// manyTunnels holds n tunnels open at once and samples sandboxd's RSS.
func (b *bench) manyTunnels(n int) error {
	py := filepath.Join(b.ws, ".tunnels.py")
	if err := os.WriteFile(py, []byte(tunnelsPy), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(b.bin, "run", "--policy", b.policy, "--", "python3", py, strconv.Itoa(n), b.echoAdr)
	cmd.Dir = b.ws
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	var mu sync.Mutex
	peak := 0
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if kb := rssKB(cmd.Process.Pid); kb > 0 {
				mu.Lock()
				peak = max(peak, kb)
				mu.Unlock()
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	if err != nil {
		return fmt.Errorf("tunnels: %w: %s", err, out.String())
	}
	f := strings.Fields(out.String())
	if len(f) != 2 {
		return fmt.Errorf("tunnels: %q", out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("### %d tunnels open at once through one run's proxy\n\n", n)
	fmt.Println("| tunnels open | errors | sandboxd peak RSS |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| %s | %s | %.1f MiB |\n\n", f[0], f[1], float64(peak)/1024)
	return nil
}

// captureAddr is the address the capture figures' echo origin listens
// on: off loopback (the run's loopback is its own, never captured), on a
// dummy (or veth) interface made for the run and removed after it.
const captureAddr = "10.254.253.1"

// capture compares a connection captured inside the run (made straight
// to the origin's address, as a tool that ignores the proxy variables
// makes it) with a CONNECT through the proxy and a direct connect on the
// host, all to one echo origin off loopback, and holds n captured
// connections open at once. It needs root (the dummy interface).
func (b *bench) capture(conns, n int) error {
	if os.Geteuid() != 0 {
		fmt.Println("### Captured connections\n\n(skipped: the origin off loopback needs root)")
		return nil
	}
	const dev = "sbxbench0"
	exec.Command("ip", "link", "del", dev).Run()
	if exec.Command("ip", "link", "add", dev, "type", "dummy").Run() != nil {
		// No dummy driver: one end of a veth pair does as well.
		if out, err := exec.Command("ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p").CombinedOutput(); err != nil {
			return fmt.Errorf("a test interface: %v: %s", err, out)
		}
	}
	for _, args := range [][]string{{"addr", "add", captureAddr + "/32", "dev", dev}, {"link", "set", dev, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	defer exec.Command("ip", "link", "del", dev).Run()
	echo, err := serveEcho(captureAddr)
	if err != nil {
		return err
	}
	cb := *b
	cb.policy = filepath.Join(b.ws, ".bench-capture-policy.toml")
	pol := fmt.Sprintf("[boundaries]\nallow = [%q]\n[network]\nmax_connections = %d\n", "net connect "+echo, max(n+64, 2048))
	if err := os.WriteFile(cb.policy, []byte(pol), 0o644); err != nil {
		return err
	}
	py := filepath.Join(b.ws, ".latency.py")
	if err := os.WriteFile(py, []byte(latencyPy), 0o644); err != nil {
		return err
	}
	args := fmt.Sprintf("python3 %s %d %s ", py, conns, echo)
	direct, err := bare(args + "direct")
	if err != nil {
		return fmt.Errorf("direct latency: %w", err)
	}
	proxied, err := cb.sandboxed(args + "proxy")
	if err != nil {
		return fmt.Errorf("proxied latency: %w", err)
	}
	captured, err := cb.sandboxed(args + "direct")
	if err != nil {
		return fmt.Errorf("captured latency: %w", err)
	}
	d, p, c := durations(direct), durations(proxied), durations(captured)
	fmt.Printf("### Captured connections: connect, one byte there and back (python3, %d sequential, origin on %s)\n\n", conns, captureAddr)
	fmt.Println("| way | p50 | p99 |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| direct connect (host) | %v | %v |\n", stats.Pct(d, 50), stats.Pct(d, 99))
	fmt.Printf("| CONNECT through the run's proxy (inside sandboxd) | %v | %v |\n", stats.Pct(p, 50), stats.Pct(p, 99))
	fmt.Printf("| captured connect (inside sandboxd, no proxy variables used) | %v | %v |\n", stats.Pct(c, 50), stats.Pct(c, 99))
	fmt.Printf("| captured vs CONNECT | %v | %v |\n", stats.Pct(c, 50)-stats.Pct(p, 50), stats.Pct(c, 99)-stats.Pct(p, 99))
	fmt.Printf("| captured vs direct | %v | %v |\n\n", stats.Pct(c, 50)-stats.Pct(d, 50), stats.Pct(c, 99)-stats.Pct(d, 99))
	tpy := filepath.Join(b.ws, ".tunnels.py")
	if err := os.WriteFile(tpy, []byte(tunnelsPy), 0o644); err != nil {
		return err
	}
	out, err := cb.sandboxed(fmt.Sprintf("python3 %s %d %s capture", tpy, n, echo))
	if err != nil {
		return fmt.Errorf("captured at once: %w: %s", err, out)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return fmt.Errorf("captured at once: %q", out)
	}
	fmt.Printf("### %d captured connections open at once\n\n", n)
	fmt.Println("| open | errors |")
	fmt.Println("|---|---|")
	fmt.Printf("| %s | %s |\n\n", f[0], f[1])
	return nil
}

// rssKB is a process's resident set in KiB (0 when gone).
func rssKB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}

func durations(s string) []time.Duration {
	var out []time.Duration
	for _, f := range strings.Fields(s) {
		if us, err := strconv.Atoi(f); err == nil {
			out = append(out, time.Duration(us)*time.Microsecond)
		}
	}
	if len(out) == 0 {
		out = append(out, 0)
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

func minf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
