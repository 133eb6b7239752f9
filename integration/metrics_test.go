package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// freeLoopbackPort is a loopback address no one listens on now.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// sample is the value of one series in a scrape ("absent" when none).
func sample(text, series string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return "absent"
}

// metricsDaemon starts a daemon of the test's own that serves its
// metrics, stopped (its log shown on a failure) when the test ends; scrape
// reads them.
func metricsDaemon(t *testing.T) (td *testDaemon, addr string, scrape func() string) {
	t.Helper()
	addr = freeLoopbackPort(t)
	td = spawnDaemon(t, "--metrics-addr", addr)
	t.Cleanup(func() {
		td.cmd.Process.Signal(os.Interrupt)
		<-td.exited
		if t.Failed() {
			t.Logf("daemon log:\n%s", td.log.String())
		}
	})
	return td, addr, func() string {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("scrape: %v\n%s", err, td.log.String())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
}

// The daemon's metrics, scraped after a scripted run, count what it did
// by value; promtool takes the scrape as is; no run reaches them.
func TestDaemonMetrics(t *testing.T) {
	td, addr, scrape := metricsDaemon(t)
	ids := identities(t)
	e := newEnv(t, ids[len(ids)-1]) // the unprivileged user, whose uid must not show
	vars := []string{"SANDBOXD_SOCKET=" + td.socket, "FAKE_REVIEW_KEY=fake-review-key"}
	// A secret read twice, in two runs: one boundary each time.
	for range 2 {
		e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "-c", "cat ~/.ssh/id_rsa; true")
	}
	// A write outside the model allows: one grant issued, one consumed.
	fm := newFakeModel(t, func(string) (string, string, string, string) { return "allow", "low", "high", "a build output" })
	e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
	outside := e.mkdir("outside", 0o755)
	r := e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "-c", "echo x > "+filepath.Join(outside, "x"))
	if _, err := os.Stat(filepath.Join(outside, "x")); err != nil {
		t.Fatalf("the allowed write did not land\n%s", r)
	}
	// The metrics' own port, from inside: refused whatever the rules say.
	r = e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "-c", "curl -s -m 5 -o /dev/null -w '%{http_code}' http://"+addr+"/metrics; echo")
	text := scrape()
	for series, want := range map[string]string{
		`sandboxd_boundaries_total{decision="deny",source="hard-deny",surface="filesystem"}`: "2",
		`sandboxd_boundaries_total{decision="allow",source="reviewer",surface="filesystem"}`: "1",
		`sandboxd_grants_total{event="issued"}`:                                              "1",
		`sandboxd_grants_total{event="consumed"}`:                                            "1",
		`sandboxd_review_tokens_total{direction="prompt"}`:                                   "900",
		`sandboxd_review_duration_seconds_count{reviewer="model"}`:                           "1",
		`sandboxd_exec_total{outcome="denied"}`:                                              "3",
		`sandboxd_exec_total{outcome="ok"}`:                                                  "1",
		`sandboxd_active_execs`:                                                              "0",
	} {
		if got := sample(text, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
	if strings.Contains(r.stdout, "200") || !strings.Contains(text, `sandboxd_boundaries_total{decision="deny",source="hard-deny",surface="network"} 1`) {
		t.Errorf("a run reached the metrics' port, or was not refused by a hard deny\n%s", r)
	}
	for _, leak := range []string{e.home, outside, "id_rsa", "\"" + fmt.Sprint(e.id.uid) + "\""} {
		if strings.Contains(text, leak) {
			t.Errorf("the metrics name %q", leak)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed here: the scrape's format is not checked by it")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader([]byte(text))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
