package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// auditRecords decodes `sandboxd audit show --json` output.
func auditRecords(t *testing.T, r result) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit show --json printed a line that is no JSON: %q\n%s", sc.Text(), r)
		}
		out = append(out, m)
	}
	return out
}

// decisionFor is the decision record about target, or nil.
func decisionFor(recs []map[string]any, target string) map[string]any {
	for _, m := range recs {
		if m["kind"] == "decision" && m["target"] == target {
			return m
		}
	}
	return nil
}

// TestAuditEmbedded: an embedded run's decisions go to the caller's own
// log, named by the caller's uid, with a secret value of the command
// redacted; `audit verify` names the log and its count, and after one
// byte of a record is changed it names that record.
func TestAuditEmbedded(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		out := e.mkdir("out", 0o755)
		allowed, denied := filepath.Join(out, "allowed"), filepath.Join(out, "denied")
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"),
			fmt.Sprintf("[boundaries]\nallow = [\"fs make_reg %s\"]\n", allowed), 0o644)
		token := "ghp_" + strings.Repeat("Z", 20) + randHex(8)
		r := e.sandboxdOpts(runOpts{}, "run", "--no-daemon", "--reviewer", "off", "-c", "echo a > "+allowed)
		e.sandboxdOpts(runOpts{env: []string{"GITHUB_TOKEN=" + token}}, "run", "--no-daemon", "--reviewer", "off",
			"-c", fmt.Sprintf("echo %s > %s", token, denied))
		if _, err := os.Stat(allowed); err != nil {
			t.Fatalf("the allowed write did not land (the test proves nothing)\n%s", r)
		}
		logFile := filepath.Join(e.home, ".local", "state", "sandboxd", "audit", "audit.jsonl")
		raw, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatalf("no audit log: %v", err)
		}
		if bytes.Contains(raw, []byte(token)) {
			t.Fatalf("the token reached the audit log")
		}
		v := e.sandboxdOpts(runOpts{}, "audit", "verify", "--no-daemon")
		if v.code != 0 || !strings.Contains(v.stdout, logFile+": verified: ") {
			t.Fatalf("audit verify:\n%s", v)
		}
		recs := auditRecords(t, e.sandboxdOpts(runOpts{}, "audit", "show", "--no-daemon", "--json"))
		a, d := decisionFor(recs, allowed), decisionFor(recs, denied)
		if a == nil || d == nil || a["outcome"] != "allow" || a["source"] != "policy" || d["outcome"] != "deny" ||
			a["uid"] != float64(e.id.uid) || d["uid"] != float64(e.id.uid) {
			t.Fatalf("the decisions are not recorded as made: %v / %v", a, d)
		}
		// One byte of the denied decision's record, changed.
		i := bytes.Index(raw, []byte(`"outcome":"deny"`))
		raw[i+len(`"outcome":"d`)] = 'x'
		if err := os.WriteFile(logFile, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		v = e.sandboxdOpts(runOpts{}, "audit", "verify", "--no-daemon")
		if v.code != 1 || !strings.Contains(v.stdout, "NOT VERIFIED") || !strings.Contains(v.stdout, fmt.Sprintf("record %v: ", d["seq"])) {
			t.Fatalf("an edited record was not named:\n%s", v)
		}
	})
}

// TestAuditUnwritableDenies: when the caller's audit log cannot be
// written, what the policy allows is denied (source error) and not
// done, stderr says why, and the report counts it.
func TestAuditUnwritableDenies(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		out := e.mkdir("out", 0o755)
		allowed := filepath.Join(out, "allowed")
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"),
			fmt.Sprintf("[boundaries]\nallow = [\"fs make_reg %s\"]\n", allowed), 0o644)
		// The log's directory is a file: no one, root included, makes it.
		e.writeFile(filepath.Join(e.home, ".local", "state", "sandboxd", "audit"), "not a directory\n", 0o644)
		r := e.sandboxdOpts(runOpts{}, "run", "--no-daemon", "--reviewer", "off", "-c", "echo a > "+allowed)
		if _, err := os.Stat(allowed); err == nil {
			t.Fatalf("an allow the audit log could not record was done\n%s", r)
		}
		b := reportBoundary(r, "path", allowed)
		if b == nil || b["decision"] != "deny" || b["source"] != "error" {
			t.Fatalf("boundary %v\n%s", b, r)
		}
		if n, _ := r.report["audit_failures"].(float64); n < 1 || !strings.Contains(r.stderr, "could not be written to the audit log") {
			t.Fatalf("the failure is not reported (audit_failures %v)\n%s", r.report["audit_failures"], r)
		}
	})
}

// TestAuditDaemonViews: through the daemon, each caller's decisions go to
// the machine's log, root's alone to write; each caller's `audit show`
// holds their own records and none of another user's, their `audit
// verify` checks the chain through the daemon's view, and root checks
// the files themselves.
func TestAuditDaemonViews(t *testing.T) {
	td := spawnDaemon(t)
	vars := []string{"SANDBOXD_SOCKET=" + td.socket}
	dir := filepath.Join(filepath.Dir(filepath.Dir(td.socket)), "audit")
	var envs []*env
	targets := map[int]string{}
	for _, id := range identities(t) {
		e := newEnv(t, id)
		envs = append(envs, e)
		targets[id.uid] = filepath.Join(e.mkdir("out", 0o755), "denied-"+e.canary)
		r := e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--reviewer", "off", "-c", "echo x > "+targets[id.uid]+"; true")
		if b := reportBoundary(r, "path", targets[id.uid]); b == nil || b["decision"] != "deny" {
			t.Fatalf("uid %d: no denial (the test proves nothing)\n%s", id.uid, r)
		}
	}
	for name, want := range map[string]os.FileMode{"": 0o755, "audit.jsonl": 0o600, "audit.pub": 0o644} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s/%s: %v, mode %v, want %v", dir, name, err, st.Mode().Perm(), want)
		}
	}
	for _, e := range envs {
		show := e.sandboxdOpts(runOpts{env: vars}, "audit", "show", "--daemon", "--json", "--days", "0")
		recs := auditRecords(t, show)
		if decisionFor(recs, targets[e.id.uid]) == nil {
			t.Fatalf("uid %d: its own decision is not shown\n%s", e.id.uid, show)
		}
		for uid, tgt := range targets {
			if uid != e.id.uid && strings.Contains(show.stdout, filepath.Base(tgt)) {
				t.Fatalf("uid %d was shown uid %d's record\n%s", e.id.uid, uid, show)
			}
		}
		for _, m := range recs {
			if m["uid"] != float64(e.id.uid) {
				t.Fatalf("uid %d was shown a record of uid %v", e.id.uid, m["uid"])
			}
		}
		v := e.sandboxdOpts(runOpts{env: vars}, "audit", "verify", "--daemon")
		if v.code != 0 || !strings.Contains(v.stdout, "(the daemon's, as you may see it): verified: ") {
			t.Fatalf("uid %d: audit verify through the daemon:\n%s", e.id.uid, v)
		}
	}
	if os.Geteuid() == 0 {
		files, _ := filepath.Glob(filepath.Join(dir, "audit*.jsonl"))
		v := envs[0].sandboxdOpts(runOpts{}, append([]string{"audit", "verify"}, files...)...)
		if v.code != 0 || !strings.Contains(v.stdout, "verified") {
			t.Fatalf("root's verify of the files:\n%s", v)
		}
	}
}

// TestAuditReportAfterRuns: after a boundary the model allowed in three
// runs and one it denied, the report counts them by value and suggests
// exactly the allowed boundary's rule for the caller's own policy, and
// none for the denied one.
func TestAuditReportAfterRuns(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, func(body string) (string, string, string, string) {
			if strings.Contains(body, "nope") {
				return "deny", "medium", "low", "not asked for"
			}
			return "allow", "low", "high", "the task needs it"
		})
		out := e.mkdir("out", 0o755)
		ok, nope := filepath.Join(out, "ok file"), filepath.Join(out, "nope")
		pol := modelPolicy(t, e, m, "")
		vars := runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}}
		for i := range 3 {
			os.Remove(ok)
			r := e.sandboxdOpts(vars, "run", "--no-daemon", "--policy", pol, "--reviewer", "model", "-c", fmt.Sprintf("echo %d > '%s'", i, ok))
			if _, err := os.Stat(ok); err != nil {
				t.Fatalf("run %d: the model's allow did not land (the test proves nothing)\n%s", i, r)
			}
		}
		e.sandboxdOpts(vars, "run", "--no-daemon", "--policy", pol, "--reviewer", "model", "-c", "echo x > "+nope)
		r := e.sandboxdOpts(runOpts{}, "audit", "report", "--no-daemon", "--json", "--days", "0")
		var rep struct {
			Decisions    int `json:"decisions"`
			ModelDenials int `json:"model_denials"`
			Reviewers    []struct {
				Source           string
				Decided, Allowed int
			} `json:"reviewers"`
			Suggestions []struct {
				Rule   string
				Allows int
			} `json:"suggestions"`
			TOML string `json:"toml"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("audit report --json: %v\n%s", err, r)
		}
		if rep.Decisions != 4 || rep.ModelDenials != 1 || len(rep.Reviewers) != 1 || rep.Reviewers[0].Source != "reviewer" ||
			rep.Reviewers[0].Decided != 4 || rep.Reviewers[0].Allowed != 3 {
			t.Fatalf("report figures: %+v\n%s", rep, r)
		}
		want := `fs make_reg ` + strings.ReplaceAll(ok, " ", `\ `)
		if len(rep.Suggestions) != 1 || rep.Suggestions[0].Rule != want || rep.Suggestions[0].Allows != 3 ||
			!strings.Contains(rep.TOML, filepath.Join(e.home, ".config", "sandboxd", "policy.toml")) {
			t.Fatalf("suggestions %+v, want exactly %q\n%s", rep.Suggestions, want, rep.TOML)
		}
	})
}

// TestAuditDaemonRefusesUntrustedLog: the daemon keeps its log only in a
// directory of root's alone: one another user may write (where they
// could plant a link the daemon writes through, or remove the head) is
// refused before the daemon serves anyone, and nothing is written there.
func TestAuditDaemonRefusesUntrustedLog(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	e := newEnv(t, identities(t)[1])
	dir := e.mkdir("theirs", 0o755) // owned by the unprivileged user
	sock := filepath.Join(e.mkdir("run", 0o755), "s.sock")
	os.Chown(filepath.Dir(sock), 0, 0)
	cmd := exec.Command(binary, "serve", "--socket", sock, "--audit-dir", dir, "--audit-key", filepath.Join(e.dir, "key", "audit.key"))
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the daemon served with a log directory another user owns")
	}
	if err == nil || !strings.Contains(string(out), "is not trusted") {
		t.Fatalf("the daemon did not refuse the directory: %v\n%s", err, out)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Fatal("the daemon made its socket")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the daemon wrote in the untrusted directory: %v", ents)
	}
}
