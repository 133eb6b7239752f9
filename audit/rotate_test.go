package audit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRotationContinuesTheChain(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxFileBytes = 8 << 10
	writeLog(t, cfg, 100)
	files, err := Files(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 || filepath.Base(files[len(files)-1]) != LogName {
		t.Fatalf("files %v", files)
	}
	s := mustVerify(t, cfg.Dir)
	if s.Files != len(files) || s.FirstSeq != 0 {
		t.Fatalf("summary %+v", s)
	}
	// Every rotated file ends in a checkpoint and is named after its
	// first record.
	for _, f := range files[:len(files)-1] {
		lines := readLines(t, f)
		first, _ := parseRecord(lines[0])
		last, _ := parseRecord(lines[len(lines)-1])
		if filepath.Base(f) != rotatedName(first.Seq) || last.Kind != KindCheckpoint {
			t.Errorf("%s: first seq %d, last kind %s", f, first.Seq, last.Kind)
		}
	}
}

// A rotation interrupted after the rename leaves no live file: the next
// writer makes one and links to the rotated file's last record.
func TestRotationInterruptedAfterTheRename(t *testing.T) {
	cfg := testConfig(t)
	writeLog(t, cfg, 5)
	live := filepath.Join(cfg.Dir, LogName)
	if err := os.Rename(live, filepath.Join(cfg.Dir, rotatedName(0))); err != nil {
		t.Fatal(err)
	}
	writeLog(t, cfg, 5)
	if s := mustVerify(t, cfg.Dir); s.Files != 2 || s.Records != 14 {
		t.Fatalf("summary %+v", s)
	}
	// And one that left the new live file empty.
	files, _ := Files(cfg.Dir)
	first := readLines(t, live)
	r, _ := parseRecord(first[0])
	os.Rename(live, filepath.Join(cfg.Dir, rotatedName(r.Seq)))
	os.WriteFile(live, nil, 0o600)
	writeLog(t, cfg, 1)
	if s := mustVerify(t, cfg.Dir); s.Files != len(files)+1 {
		t.Fatalf("summary %+v", s)
	}
}

func TestRetentionIsAccountedFor(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.MaxFileBytes = 8 << 10
	cfg.RetainBytes = 24 << 10
	writeLog(t, cfg, 200)
	s := mustVerify(t, cfg.Dir)
	if s.FirstSeq == 0 {
		t.Fatalf("nothing was removed: %+v", s)
	}
	files, _ := Files(cfg.Dir)
	var total int64
	for _, f := range files[:len(files)-1] {
		st, _ := os.Stat(f)
		total += st.Size()
	}
	if total > cfg.RetainBytes {
		t.Errorf("rotated files take %d bytes, retention keeps %d", total, cfg.RetainBytes)
	}
	var removed []string
	Scan(ctx, files, func(r Record) error {
		if r.Retention != nil {
			removed = append(removed, r.Retention.Files...)
		}
		return nil
	})
	if len(removed) == 0 {
		t.Fatal("no retention record in the files kept")
	}
	for _, n := range removed {
		if _, err := os.Stat(filepath.Join(cfg.Dir, n)); err == nil {
			t.Errorf("%s is named removed but is there", n)
		}
	}
	// The oldest file left, dropped by someone else: reported.
	os.Remove(files[0])
	if _, err := verifyDir(t, cfg.Dir); err == nil || !strings.Contains(err.Error(), "does not start the chain") {
		t.Fatalf("dropping the oldest kept file: %v", err)
	}
}

func TestRetentionByAge(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxFileBytes = 8 << 10
	cfg.RetainAge = time.Hour
	writeLog(t, cfg, 60)
	files, _ := Files(cfg.Dir)
	old := time.Now().Add(-2 * time.Hour)
	for _, f := range files[:2] {
		os.Chtimes(f, old, old)
	}
	writeLog(t, cfg, 60)
	if _, err := os.Stat(files[0]); err == nil {
		t.Error("a file older than the retention age is still there")
	}
	if s := mustVerify(t, cfg.Dir); s.FirstSeq == 0 {
		t.Fatalf("summary %+v", s)
	}
}

func TestRetainCount(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ago := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
	for _, c := range []struct {
		name     string
		sizes    []int64
		mtimes   []time.Time
		age      time.Duration
		maxBytes int64
		want     int
	}{
		{"keep all", []int64{10, 10}, []time.Time{ago(5), ago(1)}, 0, 0, 0},
		{"by age", []int64{10, 10, 10}, []time.Time{ago(5), ago(3), ago(1)}, 2 * time.Hour, 0, 2},
		{"by size", []int64{10, 10, 10}, []time.Time{ago(5), ago(3), ago(1)}, 0, 15, 2},
		{"only a prefix", []int64{10, 10, 10}, []time.Time{ago(1), ago(5), ago(5)}, 2 * time.Hour, 0, 0},
		{"either bound", []int64{10, 10, 10}, []time.Time{ago(5), ago(1), ago(1)}, 2 * time.Hour, 25, 1},
		{"all", []int64{10, 10}, []time.Time{ago(5), ago(5)}, time.Hour, 0, 2},
	} {
		if got := retainCount(c.sizes, c.mtimes, now, c.age, c.maxBytes); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestViewHidesOtherUsersAndVerifies(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.MaxFileBytes = 8 << 10
	writeLog(t, cfg, 60) // uids 1000 and 1001, alternating
	files, _ := Files(cfg.Dir)
	mine := func(r Record) bool { return r.UID != nil && *r.UID == 1000 }
	view := func() []byte {
		var b bytes.Buffer
		if err := View(ctx, files, mine, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	v := view()
	if bytes.Contains(v, []byte(`"uid":1001`)) {
		t.Fatal("the view shows another user's record")
	}
	pub, _ := ReadPublicKey(filepath.Join(cfg.Dir, PublicKeyName))
	path := filepath.Join(t.TempDir(), "view.jsonl")
	os.WriteFile(path, v, 0o600)
	if _, err := Verify(ctx, []string{path}, pub); err == nil || !strings.Contains(err.Error(), "only a view may hold one") {
		t.Fatalf("a view verified as a log: %v", err)
	}
	s, err := VerifyView(ctx, []string{path}, pub)
	if err != nil {
		t.Fatal(err)
	}
	full := mustVerify(t, cfg.Dir)
	if s.Records != full.Records || s.LastSigned != full.LastSigned {
		t.Fatalf("view %+v, log %+v", s, full)
	}
	stubs, own := 0, 0
	Scan(ctx, []string{path}, func(r Record) error {
		switch {
		case r.Hash != "":
			stubs++
			if r.Kind != "" || r.UID != nil || !r.Time.IsZero() {
				t.Errorf("stub %d has content: %+v", r.Seq, r)
			}
		case mine(r):
			own++
		case !r.Kind.own():
			t.Errorf("record %d of another user in the view", r.Seq)
		}
		return nil
	})
	if stubs != 30 || own != 30 {
		t.Fatalf("%d stubs, %d own records", stubs, own)
	}
	// The user's own record edited in the log: the view shows it.
	lines := readLines(t, files[1])
	for i, l := range lines[:len(lines)-1] {
		if bytes.Contains(l, []byte(`"uid":1000`)) {
			lines[i] = bytes.Replace(l, []byte(`"outcome":"allow"`), []byte(`"outcome":"deny"`), 1)
			break
		}
	}
	writeLines(t, files[1], lines)
	os.WriteFile(path, view(), 0o600)
	if _, err := Verify(ctx, []string{path}, pub); err == nil {
		t.Fatal("the view of an edited log verifies")
	}
}

// A log cut back behind its signed head is not carried on: a writer that
// did would reuse the cut records' seqs and sign a head over the cut, and
// Verify would then accept the log as whole.
func TestWriterRefusesALogCutBehindItsHead(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, dir string)
	}{
		{"live file removed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, LogName)); err != nil {
				t.Fatal(err)
			}
		}},
		{"live file cut to its first line", func(t *testing.T, dir string) {
			p := filepath.Join(dir, LogName)
			writeLines(t, p, readLines(t, p)[:1])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := testConfig(t)
			cfg.MaxFileBytes = 4 << 10
			writeLog(t, cfg, 40)
			if files, _ := Files(cfg.Dir); len(files) < 3 {
				t.Fatalf("only %d files", len(files))
			}
			before, err := os.ReadFile(filepath.Join(cfg.Dir, HeadName))
			if err != nil {
				t.Fatal(err)
			}
			tc.cut(t, cfg.Dir)
			if l, err := Open(ctx, cfg); err == nil {
				l.Append(ctx, decision(1000, 1))
				l.Close(ctx)
				t.Error("Open carried on a log cut behind its head")
			}
			if after, _ := os.ReadFile(filepath.Join(cfg.Dir, HeadName)); !bytes.Equal(before, after) {
				t.Error("the head was written again over the cut")
			}
		})
	}
}
