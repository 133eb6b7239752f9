package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

func TestAppendScanVerify(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.CheckpointEvery = 4
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want []Record
	for i := range 10 {
		r, err := l.Append(ctx, decision(1000, i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s := mustVerify(t, cfg.Dir)
	// genesis, first checkpoint, 10 events, a checkpoint after seqs 4, 8
	// and 12, the last one at Close.
	if s.Records != 16 || s.Checkpoints != 5 || s.FirstSeq != 0 || s.LastSeq != 15 || s.LastSigned != 15 || s.Files != 1 {
		t.Fatalf("summary %+v", s)
	}
	var got []Record
	err = Scan(ctx, []string{filepath.Join(cfg.Dir, LogName)}, func(r Record) error {
		if !r.Kind.own() {
			got = append(got, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("scanned %d events, appended %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Note != want[i].Note || *got[i].UID != 1000 || !got[i].Time.Equal(want[i].Time) {
			t.Errorf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestAppendRefusesTheLogsOwnKinds(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	for _, k := range []Kind{KindCheckpoint, KindGenesis, KindRetention, "", "Decision", `a"b`} {
		if _, err := l.Append(ctx, Event{Kind: k}); err == nil {
			t.Errorf("Append accepted kind %q", k)
		}
	}
}

func TestLongFieldsAreCut(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev := decision(1000, 1)
	ev.Command = strings.Repeat("é", 100<<10)          // 200 KiB of two-byte characters
	ev.Rationale = strings.Repeat("<&>\x01", 20<<10)   // escaped to six bytes each
	ev.Note = strings.Repeat("n", 30<<10) + "\xff\xfe" // invalid UTF-8 at its end
	r, err := l.Append(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(r.Command, CutMark) || len(r.Command) >= len(ev.Command) {
		t.Errorf("command not cut: %d bytes", len(r.Command))
	}
	for _, line := range readLines(t, l.Path()) {
		if len(line)+1 > MaxLine {
			t.Errorf("line of %d bytes", len(line))
		}
	}
	mustVerify(t, cfg.Dir)
}

// A record's text that is not UTF-8 is written so that its line reads
// back: one such line would otherwise stop Scan and View at it, and with
// them every user's view of the machine's log.
func TestTextNotUTF8ReadsBack(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	uid := 1000
	for _, text := range []string{"\xff", "a\xfe\xffb", "\xed\xa0\x80", "ok \u00e9 \xc3"} {
		if _, err := l.Append(ctx, Event{Kind: KindOverride, UID: &uid, Command: text, Note: "not issued: " + text}); err != nil {
			t.Fatal(err)
		}
	}
	var view bytes.Buffer
	snap, err := l.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.View(ctx, func(Record) bool { return true }, &view); err != nil {
		t.Errorf("View: %v", err)
	}
	snap.Close()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	files, err := Files(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = Scan(ctx, files, func(r Record) error {
		if r.IsEvent() {
			n++
			if !utf8.ValidString(r.Command) || !utf8.ValidString(r.Note) {
				t.Errorf("record %d: text not UTF-8: %q %q", r.Seq, r.Command, r.Note)
			}
		}
		return nil
	})
	if err != nil || n != 4 {
		t.Errorf("Scan read %d events, want 4: %v", n, err)
	}
	mustVerify(t, cfg.Dir)
}

func TestPermissions(t *testing.T) {
	old := syscall.Umask(0o077) // the strictest umask a daemon may run with
	defer syscall.Umask(old)
	ctx := context.Background()
	cfg := testConfig(t)
	writeLog(t, cfg, 3)
	for path, want := range map[string]os.FileMode{
		cfg.Dir:                               0o700,
		cfg.KeyFile:                           0o600,
		filepath.Join(cfg.Dir, LogName):       0o600,
		filepath.Join(cfg.Dir, lockName):      0o600,
		filepath.Join(cfg.Dir, PublicKeyName): 0o644,
		filepath.Join(cfg.Dir, HeadName):      0o644,
	} {
		if got := mode(t, path); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}
	// An existing directory keeps its mode: the daemon's caller chose it.
	cfg2 := testConfig(t)
	if err := os.Mkdir(cfg2.Dir, 0o750); err != nil {
		t.Fatal(err)
	}
	os.Chmod(cfg2.Dir, 0o750)
	writeLog(t, cfg2, 1)
	if got := mode(t, cfg2.Dir); got != 0o750 {
		t.Errorf("existing directory's mode changed to %v", got)
	}
	// A key others may read is refused.
	if err := os.Chmod(cfg.KeyFile, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, cfg); err == nil {
		t.Error("Open accepted a key its group may read")
	}
}

func TestPublishedKeyMustMatch(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	writeLog(t, cfg, 2)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	b, err := encodePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, PublicKeyName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, cfg); err == nil {
		t.Fatal("Open accepted a published key that is not its key's")
	}
	// Another key file against the log's head: refused too.
	cfg.KeyFile = filepath.Join(t.TempDir(), "other.key")
	os.Remove(filepath.Join(cfg.Dir, PublicKeyName))
	if _, err := Open(ctx, cfg); err == nil {
		t.Fatal("Open accepted a key that did not sign the head")
	}
}

func TestReopenContinuesTheChain(t *testing.T) {
	cfg := testConfig(t)
	writeLog(t, cfg, 5)
	writeLog(t, cfg, 5)
	s := mustVerify(t, cfg.Dir)
	// genesis, checkpoint, 5 events, checkpoint; 5 events, checkpoint.
	if s.Records != 14 || s.Checkpoints != 3 {
		t.Fatalf("summary %+v", s)
	}
	// Without its head, a log past its first checkpoint is refused by
	// the writer and the verifier alike: the head is what shows records
	// cut from the end, and only a crash between the first checkpoint and
	// its head may leave none.
	os.Remove(filepath.Join(cfg.Dir, HeadName))
	if _, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "audit.head is missing") {
		t.Fatalf("a log without its head was opened: %v", err)
	}
	pub, _ := ReadPublicKey(filepath.Join(cfg.Dir, PublicKeyName))
	files, _ := Files(cfg.Dir)
	if _, err := Verify(context.Background(), files, pub); err == nil || !strings.Contains(err.Error(), "the signed head is missing") {
		t.Fatalf("a log without its head verified: %v", err)
	}
}

// A crash between the first checkpoint and its head leaves a log whose
// head the next writer writes again.
func TestFirstHeadRewritten(t *testing.T) {
	cfg := testConfig(t)
	l, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.Close(context.Background())
	os.Remove(filepath.Join(cfg.Dir, HeadName))
	writeLog(t, cfg, 1)
	if _, err := os.Stat(filepath.Join(cfg.Dir, HeadName)); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, cfg.Dir)
}

func TestTimerSignsAQuietLog(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.CheckpointAfter = 20 * time.Millisecond
	before := runtime.NumGoroutine()
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, decision(1000, 1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := mustVerify(t, cfg.Dir)
		if s.LastSigned == s.LastSeq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint after the quiet period: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := l.Append(ctx, decision(1000, 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, decision(1000, 3)); err == nil {
		t.Error("Append after Close succeeded")
	}
	time.Sleep(50 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines before Open, %d after Close", before, after)
	}
}

func TestStaleTailIsSignedByTheNextWriter(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cfg.Now = func() time.Time { return now }
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, decision(1000, 1)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour + time.Second) // its writer "died": no timer fired
	if _, err := l.Append(ctx, decision(1000, 2)); err != nil {
		t.Fatal(err)
	}
	kinds := kindsOf(t, readLines(t, l.Path()))
	want := "genesis checkpoint decision checkpoint decision"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("kinds %q, want %q", got, want)
	}
	l.Close(ctx)
}

func TestCutShortLineIsRepaired(t *testing.T) {
	cfg := testConfig(t)
	writeLog(t, cfg, 3)
	// A writer died in the middle of its line.
	f, err := os.OpenFile(filepath.Join(cfg.Dir, LogName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":7,"prev":"00`)
	f.Close()
	if _, err := verifyDir(t, cfg.Dir); err == nil {
		t.Fatal("Verify accepted a cut-short line")
	}
	writeLog(t, cfg, 2)
	s := mustVerify(t, cfg.Dir)
	if s.Records != 9 { // genesis, checkpoint, 3 events, checkpoint; 2 events, checkpoint
		t.Fatalf("summary %+v", s)
	}
	if b, _ := os.ReadFile(filepath.Join(cfg.Dir, LogName)); bytes.Contains(b, []byte(`"prev":"00`+"\n")) {
		t.Fatal("the cut-short line is still there")
	}
}
