package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tamperLog writes a real log across several rotated files: small files
// and frequent checkpoints, so each tampering has a file and a
// checkpoint to hit.
func tamperLog(t *testing.T) (Config, []string) {
	t.Helper()
	cfg := testConfig(t)
	cfg.MaxFileBytes = 6 << 10
	cfg.CheckpointEvery = 5
	writeLog(t, cfg, 80)
	files, err := Files(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("want at least 5 files, have %d", len(files))
	}
	mustVerify(t, cfg.Dir)
	return cfg, files
}

// ordinary is the index of the first line in lines at or after from
// that is an event (not the log's own) and not the last line.
func ordinary(t *testing.T, lines [][]byte, from int) int {
	t.Helper()
	for i := from; i < len(lines)-1; i++ {
		if r, err := parseRecord(lines[i]); err == nil && !r.Kind.own() {
			return i
		}
	}
	t.Fatal("no event line")
	return 0
}

// TestVerifyNamesTheFirstBadRecord tampers with a copy of a real log in
// each way an attacker without the key can, and checks the problem
// Verify names: the file, the line and what it says.
func TestVerifyNamesTheFirstBadRecord(t *testing.T) {
	cfg, files := tamperLog(t)
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Base(f)
	}
	other := testConfig(t)
	other.MaxFileBytes, other.CheckpointEvery = cfg.MaxFileBytes, cfg.CheckpointEvery
	writeLog(t, other, 80)
	_, forger, _ := ed25519.GenerateKey(rand.Reader)

	// Each case changes the copy dir and says where the problem is:
	// the file (by index into names), the line, and words of What.
	type want struct {
		file int
		line int // 0: the head file
		what string
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string) want
	}{
		{"edit one byte", func(t *testing.T, dir string) want {
			p := filepath.Join(dir, names[1])
			lines := readLines(t, p)
			i := ordinary(t, lines, 0)
			lines[i] = bytes.Replace(lines[i], []byte(`"event `), []byte(`"Event `), 1)
			writeLines(t, p, lines)
			return want{1, i + 1, "this record was edited"}
		}},
		{"delete a record", func(t *testing.T, dir string) want {
			p := filepath.Join(dir, names[2])
			lines := readLines(t, p)
			i := ordinary(t, lines, 1)
			writeLines(t, p, append(lines[:i:i], lines[i+1:]...))
			return want{2, i + 1, "records were removed or inserted"}
		}},
		{"reorder two records", func(t *testing.T, dir string) want {
			p := filepath.Join(dir, names[2])
			lines := readLines(t, p)
			i := ordinary(t, lines, 1)
			lines[i], lines[i+1] = lines[i+1], lines[i]
			writeLines(t, p, lines)
			return want{2, i + 1, "records were removed or inserted"}
		}},
		{"insert a copy of a record", func(t *testing.T, dir string) want {
			p := filepath.Join(dir, names[1])
			lines := readLines(t, p)
			i := ordinary(t, lines, 1)
			lines = append(lines[:i+1], append([][]byte{lines[i-1]}, lines[i+1:]...)...)
			writeLines(t, p, lines)
			return want{1, i + 2, "reordered or repeated"}
		}},
		{"insert a forged record and chain the rest again", func(t *testing.T, dir string) want {
			all, at := joinFiles(t, dir, names)
			i := ordinary(t, all, at[1])
			forged := bytes.Replace(all[i], []byte(`"outcome":"allow"`), []byte(`"outcome":"deny"`), 1)
			all = append(all[:i+1], append([][]byte{forged}, all[i+1:]...)...)
			rechain(t, all, i, forger)
			return splitFiles(t, dir, names, all, at, firstCheckpointAfter(t, all, i+1), "not signed by the published key")
		}},
		{"edit a record and sign the chain with another key", func(t *testing.T, dir string) want {
			all, at := joinFiles(t, dir, names)
			i := ordinary(t, all, at[2])
			all[i] = bytes.Replace(all[i], []byte(`"source":"model"`), []byte(`"source":"human"`), 1)
			rechain(t, all, i, forger)
			return splitFiles(t, dir, names, all, at, firstCheckpointAfter(t, all, i), "not signed by the published key")
		}},
		{"cut a line short", func(t *testing.T, dir string) want {
			p := filepath.Join(dir, names[1])
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-20], 0o600)
			return want{1, len(readLines(t, p)), "cut short"}
		}},
		{"cut whole records from the end", func(t *testing.T, dir string) want {
			last := len(names) - 1
			p := filepath.Join(dir, names[last])
			lines := readLines(t, p)
			k := min(3, len(lines)-1)
			if k < 1 {
				t.Fatalf("the live file has %d lines", len(lines))
			}
			writeLines(t, p, lines[:len(lines)-k])
			return want{last, len(lines) - k + 1, "records were cut from its end"}
		}},
		{"drop a rotated file", func(t *testing.T, dir string) want {
			os.Remove(filepath.Join(dir, names[2]))
			return want{3, 1, "a file is missing from the set"}
		}},
		{"drop the oldest file", func(t *testing.T, dir string) want {
			os.Remove(filepath.Join(dir, names[0]))
			return want{1, 1, "does not start the chain"}
		}},
		{"a file of another log in the set", func(t *testing.T, dir string) want {
			ofiles, err := Files(other.Dir)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(ofiles[2])
			os.WriteFile(filepath.Join(dir, names[2]), b, 0o600)
			return want{2, 1, "a file is missing from the set, or this file is of another log"}
		}},
		{"another log's genesis file first", func(t *testing.T, dir string) want {
			ofiles, _ := Files(other.Dir)
			b, _ := os.ReadFile(ofiles[0])
			os.WriteFile(filepath.Join(dir, names[0]), b, 0o600)
			return want{0, 1, "started by another key"}
		}},
		{"a checkpoint missing where the head says one is", func(t *testing.T, dir string) want {
			last := len(names) - 1
			p := filepath.Join(dir, names[last])
			lines := readLines(t, p)
			cp, err := parseRecord(lines[len(lines)-1])
			if err != nil || cp.Kind != KindCheckpoint {
				t.Fatalf("last line is not a checkpoint: %v", err)
			}
			ev := Record{Seq: cp.Seq, Prev: cp.Prev, Time: cp.Time, Event: decision(1000, 99)}
			lines[len(lines)-1], _ = encodeLine(&ev)
			writeLines(t, p, lines)
			return want{last, len(lines), "the head names a checkpoint here"}
		}},
		{"a damaged head", func(t *testing.T, dir string) want {
			os.WriteFile(filepath.Join(dir, HeadName), []byte("{\"chain\":"), 0o644)
			return want{-1, 0, "the head file is not signed by the published key"}
		}},
		{"a head signed by another key", func(t *testing.T, dir string) want {
			writeHead(dir, forger, headFile{Chain: "x", Seq: 1, Hash: zeroHash})
			return want{-1, 0, "the head file is not signed by the published key"}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, cfg.Dir)
			w := c.tamper(t, dir)
			_, err := verifyDir(t, dir)
			if err == nil {
				t.Fatal("Verify accepted the tampered log")
			}
			p := problemOf(t, err)
			wantFile := HeadName
			if w.file >= 0 {
				wantFile = names[w.file]
			}
			if filepath.Base(p.File) != wantFile || p.Line != w.line || !strings.Contains(p.What, w.what) {
				t.Fatalf("problem %v\nwant %s:%d: ...%s", p, wantFile, w.line, w.what)
			}
		})
	}
}

// joinFiles is every line of the set, and where each file starts.
func joinFiles(t *testing.T, dir string, names []string) ([][]byte, []int) {
	var all [][]byte
	var at []int
	for _, n := range names {
		at = append(at, len(all))
		all = append(all, readLines(t, filepath.Join(dir, n))...)
	}
	return all, at
}

// splitFiles writes all back into the files (each keeps its number of
// lines, the last takes what is left) and says where line i is.
func splitFiles(t *testing.T, dir string, names []string, all [][]byte, at []int, i int, what string) (w struct {
	file int
	line int
	what string
}) {
	for k, n := range names {
		end := len(all)
		if k+1 < len(at) {
			end = at[k+1]
		}
		writeLines(t, filepath.Join(dir, n), all[at[k]:end])
		if i >= at[k] && i < end {
			w.file, w.line = k, i-at[k]+1
		}
	}
	w.what = what
	return w
}

func firstCheckpointAfter(t *testing.T, all [][]byte, i int) int {
	for j := i + 1; j < len(all); j++ {
		if r, _ := parseRecord(all[j]); r.Kind == KindCheckpoint {
			return j
		}
	}
	t.Fatal("no checkpoint after the change")
	return 0
}

// TestVerifyAcceptsUntouchedCopies: the copies the table tampers with
// verify before they are touched (so each failure is the tampering's).
func TestVerifyAcceptsUntouchedCopies(t *testing.T) {
	cfg, files := tamperLog(t)
	dir := copyDir(t, cfg.Dir)
	s := mustVerify(t, dir)
	if s.Files != len(files) || s.LastSigned != s.LastSeq {
		t.Fatalf("summary %+v", s)
	}
	_ = context.Background()
}

// A live file removed, or put out of the set as no regular file, still
// leaves the head to say where the log ended: the records cut with it are
// reported, not taken for a set that ends at its last rotated file.
func TestVerifySeesTheLiveFileGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone func(t *testing.T, live string)
	}{
		{"removed", func(t *testing.T, live string) {
			if err := os.Remove(live); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink", func(t *testing.T, live string) {
			if err := os.Remove(live); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/dev/null", live); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.MaxFileBytes = 4 << 10
			writeLog(t, cfg, 40)
			mustVerify(t, cfg.Dir)
			tc.gone(t, filepath.Join(cfg.Dir, LogName))
			_, err := verifyDir(t, cfg.Dir)
			if p := problemOf(t, err); !strings.Contains(p.What, "records were cut from its end") {
				t.Errorf("got %v", p)
			}
		})
	}
}
