// Command connect measures what it costs that sandboxd's supervisor makes
// every connect of a sandboxed command itself (the price of unix sockets
// that reach only the run's own): the latency of a connect to a server
// on the same loopback (TCP) and to a unix socket in /tmp, each made in
// the same process as its listener, bare and sandboxed, with and
// without boundary detection, and with another sandboxd binary (-before,
// the commit before unix sockets, which refuses them). Each contender
// runs the same Python program once per round, rounds interleaved; the
// program times -n sequential connects of each kind and prints their
// p50 and p99, with blocking and with non-blocking sockets (a
// non-blocking connect waits for its completion in select). It prints a
// Markdown table for docs/BENCHMARKS.md.
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
import json, os, select, socket, sys, threading, time
n = int(sys.argv[1])
def serve(s):
    while True:
        try:
            c, _ = s.accept(); c.close()
        except OSError:
            return
def bench(fam, addr, blocking=True):
    ts = []
    for _ in range(n):
        c = socket.socket(fam); c.setblocking(blocking); t = time.perf_counter()
        try:
            c.connect(addr)
        except BlockingIOError:
            select.select([], [c], [])
        ts.append(time.perf_counter() - t); c.close()
    ts.sort()
    return [ts[len(ts) // 2] * 1e6, ts[int(len(ts) * 0.99)] * 1e6]
out = {}
t = socket.socket(); t.bind(('127.0.0.1', 0)); t.listen(128)
threading.Thread(target=serve, args=(t,), daemon=True).start()
out['tcp'] = bench(socket.AF_INET, t.getsockname())
out['tcp_nb'] = bench(socket.AF_INET, t.getsockname(), False)
try:
    p = '/tmp/bench-connect-%d.sock' % os.getpid()
    u = socket.socket(socket.AF_UNIX); u.bind(p); u.listen(128)
    threading.Thread(target=serve, args=(u,), daemon=True).start()
    out['unix'] = bench(socket.AF_UNIX, p)
    out['unix_nb'] = bench(socket.AF_UNIX, p, False)
    os.unlink(p)
except OSError as e:
    out['unix'] = None
print(json.dumps(out))
`

type contender struct {
	name string
	argv []string
	// by case (tcp, tcp_nb, unix, unix_nb): one run's p50 and p99 each
	got map[string][][2]float64
}

var cases = []struct{ key, title string }{
	{"tcp", "TCP"}, {"tcp_nb", "TCP, non-blocking"}, {"unix", "unix"}, {"unix_nb", "unix, non-blocking"},
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
	for _, c := range cs {
		c.got = map[string][][2]float64{}
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
			var got map[string]*[2]float64
			if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &got); err != nil {
				return fmt.Errorf("%s: %w: %s", c.name, err, out)
			}
			for k, v := range got {
				if v != nil {
					c.got[k] = append(c.got[k], *v)
				}
			}
		}
	}
	fmt.Printf("| %d sequential connects, median of %d runs |", n, rounds)
	for _, k := range cases {
		fmt.Printf(" %s p50 | p99 |", k.title)
	}
	fmt.Printf("\n|---|%s\n", strings.Repeat("---|---|", len(cases)))
	for _, c := range cs {
		fmt.Printf("| %s |", c.name)
		for _, k := range cases {
			fmt.Printf(" %s | %s |", med(c.got[k.key], 0), med(c.got[k.key], 1))
		}
		fmt.Println()
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
