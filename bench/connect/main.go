// Command connect measures what it costs that sandboxd's supervisor makes
// every connect of a sandboxed command itself (the price of unix sockets
// that reach only the run's own): the latency of a connect to a server
// on the same loopback (TCP) and to a unix socket in /tmp, each made in
// the same process as its listener, bare and sandboxed, with and
// without boundary detection, and with another sandboxd binary (-before,
// the commit before unix sockets, which refuses them). Each contender
// runs the same Python program once per round, rounds interleaved; the
// program times -n sequential connects of each kind and prints their
// p50 and p99. It prints a Markdown table for docs/BENCHMARKS.md.
//
//	go run ./bench/connect [-rounds 5] [-n 2000] [-dir .] [-sandboxd bin/sandboxd] [-before OLD-BINARY]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

const program = `
import json, os, socket, sys, threading, time
n = int(sys.argv[1])
def serve(s):
    while True:
        try:
            c, _ = s.accept(); c.close()
        except OSError:
            return
def bench(fam, addr):
    ts = []
    for _ in range(n):
        c = socket.socket(fam); t = time.perf_counter(); c.connect(addr); ts.append(time.perf_counter() - t); c.close()
    ts.sort()
    return [ts[len(ts) // 2] * 1e6, ts[int(len(ts) * 0.99)] * 1e6]
out = {}
t = socket.socket(); t.bind(('127.0.0.1', 0)); t.listen(128)
threading.Thread(target=serve, args=(t,), daemon=True).start()
out['tcp'] = bench(socket.AF_INET, t.getsockname())
try:
    p = '/tmp/bench-connect-%d.sock' % os.getpid()
    u = socket.socket(socket.AF_UNIX); u.bind(p); u.listen(128)
    threading.Thread(target=serve, args=(u,), daemon=True).start()
    out['unix'] = bench(socket.AF_UNIX, p)
    os.unlink(p)
except OSError as e:
    out['unix'] = None
print(json.dumps(out))
`

type contender struct {
	name string
	argv []string
	tcp  [][2]float64
	unix [][2]float64
}

func main() {
	rounds := flag.Int("rounds", 5, "rounds (each contender once per round)")
	n := flag.Int("n", 2000, "connects of each kind per run")
	dir := flag.String("dir", ".", "where to make the throw-away workspace (not /tmp)")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	before := flag.String("before", "", "another sandboxd binary to compare")
	flag.Parse()
	if err := run(*rounds, *n, *dir, *bin, *before); err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
}

func run(rounds, n int, dir, bin, before string) error {
	bin, _ = filepath.Abs(bin)
	if before != "" {
		before, _ = filepath.Abs(before)
	}
	ws, err := os.MkdirTemp(dir, ".bench-connect-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	ws, _ = filepath.Abs(ws)
	script := filepath.Join(ws, "connect.py")
	if err := os.WriteFile(script, []byte(program), 0o644); err != nil {
		return err
	}
	py := []string{"python3", script, fmt.Sprint(n)}
	sb := func(b string, extra ...string) []string {
		return append(append(append([]string{b, "run", "--workspace", ws}, extra...), "--"), py...)
	}
	cs := []*contender{
		{name: "bare", argv: py},
		{name: "sandboxd --detect off", argv: sb(bin, "--detect", "off")},
		{name: "sandboxd", argv: sb(bin)},
	}
	if before != "" {
		cs = append(cs, &contender{name: "sandboxd before (observes connects, refuses unix sockets)", argv: sb(before)})
	}
	for r := 0; r < rounds; r++ {
		for _, c := range cs {
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Dir = ws
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			var got struct{ TCP, Unix *[2]float64 }
			if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &got); err != nil {
				return fmt.Errorf("%s: %w: %s", c.name, err, out)
			}
			if got.TCP != nil {
				c.tcp = append(c.tcp, *got.TCP)
			}
			if got.Unix != nil {
				c.unix = append(c.unix, *got.Unix)
			}
		}
	}
	fmt.Printf("| %d sequential connects, median of %d runs | TCP p50 | TCP p99 | unix p50 | unix p99 |\n|---|---|---|---|---|\n", n, rounds)
	for _, c := range cs {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", c.name, med(c.tcp, 0), med(c.tcp, 1), med(c.unix, 0), med(c.unix, 1))
	}
	return nil
}

// med is the median over runs of one percentile, in µs ("—": none).
func med(v [][2]float64, i int) string {
	if len(v) == 0 {
		return "—"
	}
	x := make([]float64, len(v))
	for k := range v {
		x[k] = v[k][i]
	}
	sort.Float64s(x)
	return fmt.Sprintf("%.0f µs", x[len(x)/2])
}
