package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// fakeEgress is a run's way out whose servers say which of them a
// connection reached: the proxy's listener answers "proxy", the capture
// "captured " and the address the command connected to. dns, when set,
// serves the stub resolver's socket (capture needs both).
func fakeEgress(port uint16, capture bool) *sandbox.Egress {
	answer := func(say func(net.Conn) string) func(context.Context, net.Listener, sandbox.Dialer) error {
		return func(ctx context.Context, ln net.Listener, _ sandbox.Dialer) error {
			go func() { <-ctx.Done(); ln.Close() }()
			for {
				c, err := ln.Accept()
				if err != nil {
					return err
				}
				io.WriteString(c, say(c)+"\n")
				c.Close()
			}
		}
	}
	e := &sandbox.Egress{Port: port, Serve: answer(func(net.Conn) string { return "proxy" })}
	if capture {
		e.Capture = answer(func(c net.Conn) string { return "captured " + c.LocalAddr().String() })
		e.DNS = func(ctx context.Context, pc net.PacketConn) error {
			<-ctx.Done()
			return pc.Close()
		}
	}
	return e
}

// netScript reports what the command's network lets it do: a direct
// connect off loopback (captured, or refused), the proxy's port, a
// datagram to the stub resolver and one elsewhere, and the inode of its
// network namespace (each run's own).
const netScript = `
direct=$( (exec 3<>/dev/tcp/192.0.2.7/80 && head -n1 <&3) 2>&1 ) || direct="refused: $direct"
echo "direct: $direct"
proxy=$( (exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT && head -n1 <&3) 2>&1 ) || proxy="refused"
echo "proxy: $proxy"
(echo x > /dev/udp/127.0.0.1/53) 2>/dev/null && echo "stub udp: sent" || echo "stub udp: refused"
(echo x > /dev/udp/192.0.2.7/53) 2>/dev/null && echo "other udp: sent" || echo "other udp: refused"
echo "netns: $(readlink /proc/self/ns/net)"
`

// netView is what netScript printed, by line.
type netView map[string]string

func runNet(t *testing.T, e leakEnv, pool *sandbox.ReadyHelpers, eg *sandbox.Egress, uid int) (sandbox.Result, netView) {
	t.Helper()
	spec := e.spec("bash", "-c", netScript)
	spec.Ready, spec.Egress, spec.UID, spec.GID = pool, eg, uid, uid
	if eg != nil {
		spec.Env = append(spec.Env, "PROXY_PORT="+strconv.Itoa(int(eg.Port)))
	}
	var out, errs bytes.Buffer
	spec.Stdout, spec.Stderr = &out, &errs
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	res, err := sandbox.Run(context.Background(), spec, log)
	if res.Layer != nil {
		res.Layer.Close()
	}
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %d\n%s%s", err, res.ExitCode, out.String(), errs.String())
	}
	v := netView{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if k, val, ok := strings.Cut(sc.Text(), ": "); ok {
			v[k] = val
		}
	}
	return res, v
}

// wantCaptured checks the effect of a capture: a direct connect reaches
// the supervisor's capture with its address, the proxy answers at its
// port, the stub takes a datagram and nothing else does.
func wantCaptured(t *testing.T, what string, res sandbox.Result, v netView) {
	t.Helper()
	if res.Capture != "on" || v["direct"] != "captured 192.0.2.7:80" || v["proxy"] != "proxy" ||
		v["stub udp"] != "sent" || v["other udp"] != "refused" {
		t.Fatalf("%s: want captured (capture %q %q): %v", what, res.Capture, res.CaptureWhy, v)
	}
}

// TestReadyCapture: a helper that prepared the capture while it waited
// serves a capturing run as one started for it would: a direct connect
// reaches the supervisor, UDP but to the stub is refused; two runs at
// once never share a helper (each its own network namespace); a run
// without capture never takes a capturing helper and has no capture at
// all, through the pool or not.
func TestReadyCapture(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// One per launch: each Refill below then starts exactly one.
	pool := sandbox.NewReadyHelpers(sandbox.ReadyOptions{Max: 4, PerLaunch: 1, Idle: time.Hour}, log)
	defer pool.Close()
	e := newLeakEnv(t)
	eg := fakeEgress(43101, true)
	res, v := runNet(t, e, pool, eg, 0)
	wantCaptured(t, "without a ready helper", res, v)
	pool.Refill()
	waitReady(t, pool, 1)
	res, v = runNet(t, e, pool, eg, 0)
	wantCaptured(t, "on a prepared helper", res, v)
	if st := pool.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("pool: %+v, want 1 hit, 1 miss", st)
	}
	// Two at once, with one helper ready: one takes it, the other
	// starts its own.
	pool.Refill()
	waitReady(t, pool, 1)
	var wg sync.WaitGroup
	views := make([]netView, 2)
	for i := range views {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, v := runNet(t, e, pool, eg, 0)
			wantCaptured(t, fmt.Sprint("concurrent run ", i), res, v)
			views[i] = v
		}()
	}
	wg.Wait()
	if views[0]["netns"] == "" || views[0]["netns"] == views[1]["netns"] {
		t.Fatalf("two runs shared a network namespace: %v, %v", views[0], views[1])
	}
	if st := pool.Stats(); st.Hits != 2 || st.Misses != 2 {
		t.Fatalf("pool: %+v, want 2 hits, 2 misses", st)
	}
	// A capturing helper waits; a run without capture is a miss and has
	// none: no route off loopback, no stub, no UDP at all.
	pool.Refill()
	waitReady(t, pool, 1)
	for _, noCapture := range []*sandbox.Egress{fakeEgress(43101, false), nil} {
		st := pool.Stats()
		res, v := runNet(t, e, pool, noCapture, 0)
		if res.Capture != "" || !strings.Contains(v["direct"], "unreachable") || v["stub udp"] != "refused" || v["other udp"] != "refused" {
			t.Fatalf("a run without capture (egress %v): capture %q, %v", noCapture != nil, res.Capture, v)
		}
		if want := map[bool]string{true: "proxy", false: "refused"}[noCapture != nil]; v["proxy"] != want {
			t.Fatalf("a run without capture (egress %v): proxy %q, want %q", noCapture != nil, v["proxy"], want)
		}
		if got := pool.Stats(); got.Hits != st.Hits || got.Misses != st.Misses+1 {
			t.Fatalf("a run without capture took a capturing helper: %+v, then %+v", st, got)
		}
	}
	// And one without capture on a helper made for one without.
	pool.Refill()
	waitReady(t, pool, 2) // the capturing one, and one without
	st := pool.Stats()
	res, v = runNet(t, e, pool, fakeEgress(43101, false), 0)
	if res.Capture != "" || !strings.Contains(v["direct"], "unreachable") || v["stub udp"] != "refused" || v["proxy"] != "proxy" {
		t.Fatalf("a run without capture on a ready helper: capture %q, %v", res.Capture, v)
	}
	if got := pool.Stats(); got.Hits != st.Hits+1 {
		t.Fatalf("the run without capture found no helper made for it: %+v, then %+v", st, got)
	}
}

// TestReadyCaptureMovesOffTheProxyPort: the capture's port is the
// helper's choice, made before it knows the proxy's; when the run's
// proxy (or its SOCKS5 endpoint, two above) takes that very port, the
// capture moves and both work.
func TestReadyCaptureMovesOffTheProxyPort(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := sandbox.NewReadyHelpers(sandbox.ReadyOptions{Max: 1, Idle: time.Hour}, log)
	defer pool.Close()
	e := newLeakEnv(t)
	res, v := runNet(t, e, pool, fakeEgress(43102, true), 0)
	wantCaptured(t, "first run", res, v)
	for _, socks := range []bool{false, true} {
		pool.Refill()
		waitReady(t, pool, 1)
		pids := waitingHelpers(t)
		if len(pids) != 1 {
			t.Fatalf("helpers waiting: %v", pids)
		}
		port := capturePort(t, pids[0])
		eg := fakeEgress(port, true)
		if socks {
			eg.Port -= 2
			eg.SOCKS = eg.Serve
		}
		res, v := runNet(t, e, pool, eg, 0)
		wantCaptured(t, fmt.Sprintf("proxy at %d, socks %v, the capture at %d", eg.Port, socks, port), res, v)
	}
	if st := pool.Stats(); st.Hits != 2 {
		t.Fatalf("pool: %+v, want 2 hits", st)
	}
}

// capturePort is the port the waiting helper pid listens at on
// 127.0.0.1 (its capture), read from its network namespace's TCP table.
func capturePort(t *testing.T, pid int) uint16 {
	t.Helper()
	// The helper prepares once started: it may not have yet.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// local address 0100007F:PORT, state 0A (listen)
			if len(f) > 3 && f[3] == "0A" && strings.HasPrefix(f[1], "0100007F:") {
				if p, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0100007F:"), 16, 16); err == nil {
					return uint16(p)
				}
			}
		}
	}
	t.Fatalf("the waiting helper %d listens nowhere", pid)
	return 0
}

// TestReadyCaptureFailed: a helper whose capture could not be prepared
// runs its command as a run whose capture failed always has: the report
// says capture is off and why, a direct connect is not captured, and no
// UDP socket exists at all (the filter without UDP), while the proxy
// still answers.
func TestReadyCaptureFailed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): a second caller, namespaces for another uid")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := sandbox.NewReadyHelpers(sandbox.ReadyOptions{Max: 2, Idle: time.Hour}, log)
	defer pool.Close()
	e, uid := otherCaller(t)
	eg := fakeEgress(43103, true)
	spec := e.spec("true")
	spec.UID, spec.GID, spec.Egress = uid, uid, eg
	if err := sandbox.AddFailingCapture(pool, spec); err != nil {
		t.Fatal(err)
	}
	res, v := runNet(t, e, pool, eg, uid)
	if st := pool.Stats(); st.Hits != 1 {
		t.Fatalf("the run did not take the helper whose capture failed: %+v", st)
	}
	if res.Capture != "off" || !strings.Contains(res.CaptureWhy, "could not be installed") ||
		strings.HasPrefix(v["direct"], "captured") || v["stub udp"] != "refused" || v["other udp"] != "refused" || v["proxy"] != "proxy" {
		t.Fatalf("a run on a helper whose capture failed: capture %q (%q), %v", res.Capture, res.CaptureWhy, v)
	}
	// The next run of that caller, on a helper started for it, captures.
	res, v = runNet(t, e, pool, eg, uid)
	wantCaptured(t, "the caller's next run", res, v)
}
