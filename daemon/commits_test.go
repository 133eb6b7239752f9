package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/session"
)

// A commit's record is root's alone and there exactly while the commit
// is in flight; at start, records with nothing left to recover go, and
// so do leftovers that name no commit.
func TestCommits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the records are root's")
	}
	dir := filepath.Join(testDir(t), "commits")
	c, err := NewCommits(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the records' directory: %v %v", st, err)
	}
	state := filepath.Join(testDir(t), "state")
	f := session.InFlight{UID: 0, GID: 0, Groups: []int{4}, Umask: 0o22, StateDir: state, Workspace: "/w", RunID: "r1"}
	end, err := c.Begin(f)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("records: %v", ents)
	}
	p := filepath.Join(dir, ents[0].Name())
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Fatalf("a record's mode is %v", st.Mode())
	}
	if got, err := readRecord(p); err != nil || got.StateDir != state || !slices.Equal(got.Groups, f.Groups) || got.Umask != f.Umask {
		t.Fatalf("record %+v %v", got, err)
	}
	end()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the record outlived its commit: %v", ents)
	}
	// A daemon killed mid-commit leaves the record, one killed while
	// writing one a temporary file; junk is no record.
	if _, err := c.Begin(f); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "x.json.new"), []byte(`{"uid":0`), 0o600)
	for name, body := range map[string]string{
		"relative.json": `{"uid":0,"gid":0,"state_dir":"state"}`,
		"unknown.json":  `{"uid":0,"gid":0,"state_dir":"/s","more":1}`,
		"two.json":      `{"uid":0,"gid":0,"state_dir":"/s"}{}`,
		"negative.json": `{"uid":-1,"gid":0,"state_dir":"/s"}`,
	} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600)
		if _, err := readRecord(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s read as a record", name)
		}
	}
	// A record root did not write is none, whatever it says.
	theirs := filepath.Join(dir, "theirs.json")
	os.WriteFile(theirs, []byte(`{"uid":0,"gid":0,"state_dir":"/s"}`), 0o600)
	os.Chown(theirs, 1000, 1000)
	if _, err := readRecord(theirs); err == nil {
		t.Error("a record of another uid's was read")
	}
	if n := c.Recover(slog.New(slog.DiscardHandler)); n != 0 {
		t.Fatalf("recovered %d commits of a state directory with no journal", n)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left after recovery: %v", ents)
	}
}

// What Recover did for a uid is told once, to that uid only.
func TestCommitsTold(t *testing.T) {
	var none *Commits
	if ev := none.Told(0); ev != nil {
		t.Fatalf("a daemon with no record told %v", ev)
	}
	c := &Commits{told: map[int][]session.Event{}}
	c.tell(1000, layer.Recovered{RunID: "r1", Action: "completed"})
	if ev := c.Told(1001); len(ev) != 0 {
		t.Fatalf("another uid was told %v", ev)
	}
	ev := c.Told(1000)
	if len(ev) != 1 || ev[0].Kind != session.KindRecovered || ev[0].Recovered.RunID != "r1" {
		t.Fatalf("told %+v", ev)
	}
	if ev := c.Told(1000); len(ev) != 0 {
		t.Fatalf("told twice: %v", ev)
	}
}
