package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/publicerr"
)

// TestWriteBack: a copy's content goes back into its file in place
// (same inode, mode kept) only when it differs, of any size; an object
// with no host file (a read copy, the zero value) is left alone, and
// nothing reads descriptor 0.
func TestWriteBack(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 640 KiB: several chunks
	bigChanged := bytes.Clone(big)
	bigChanged[len(bigChanged)-1] = 'X'
	for _, c := range []struct {
		name      string
		old, copy []byte
	}{
		{"same", []byte("a\n"), []byte("a\n")},
		{"longer", []byte("a\n"), []byte("a\nb\n")},
		{"shorter", []byte("a\nb\n"), []byte("a\n")},
		{"emptied", []byte("a\n"), nil},
		{"from empty", nil, []byte("a\n")},
		{"big same", big, big},
		{"big last byte", big, bigChanged},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			host, src := filepath.Join(dir, "host"), filepath.Join(dir, "copy")
			if err := os.WriteFile(host, c.old, 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(src, c.copy, 0o666); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Stat(host)
			h, err := os.OpenFile(host, os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			es := []openedException{{Exception: Exception{Path: host}, source: src, host: h}, {source: src}, {}}
			if err := writeBack(es, t.TempDir(), "leftovers"); err != nil {
				t.Fatal(err)
			}
			h.Close()
			got, _ := os.ReadFile(host)
			if !bytes.Equal(got, c.copy) {
				t.Errorf("host holds %d bytes, want the copy's %d", len(got), len(c.copy))
			}
			after, _ := os.Stat(host)
			if !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Errorf("host replaced or its mode changed: %v -> %v", before.Mode(), after.Mode())
			}
			if bytes.Equal(c.old, c.copy) && !after.ModTime().Equal(before.ModTime()) {
				t.Errorf("unchanged content rewritten (mtime moved)")
			}
		})
	}
}

// TestWriteBackLeavesTheHostsOwn: a copy the command did not write puts
// nothing back (an edit made on the host during the run stays); a file
// replaced on the host during the run is not written, and the command's
// content is kept where the error says.
func TestWriteBackLeavesTheHostsOwn(t *testing.T) {
	dir := t.TempDir()
	host, src := filepath.Join(dir, "host"), filepath.Join(dir, "copy")
	os.WriteFile(src, []byte("as copied\n"), 0o666)
	sum, err := digest(src)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(host, []byte("edited on the host\n"), 0o644)
	h, _ := os.Open(host)
	defer h.Close()
	if err := writeBack([]openedException{{Exception: Exception{Path: host}, source: src, host: h, copied: sum}}, t.TempDir(), "leftovers"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(host); string(b) != "edited on the host\n" {
		t.Errorf("an unwritten copy overwrote the host's edit: %q", b)
	}

	os.WriteFile(src, []byte("the command's\n"), 0o666)
	os.Rename(host, host+".old")
	os.WriteFile(host, []byte("a new file\n"), 0o644)
	state := t.TempDir()
	keep := filepath.Join(state, "leftovers")
	err = writeBack([]openedException{{Exception: Exception{Path: host}, source: src, host: h, copied: sum}}, state, "leftovers")
	if err == nil || !strings.Contains(err.Error(), "replaced") || !strings.Contains(publicerr.Internal(err), keep) {
		t.Fatalf("a replaced file: err %v", publicerr.Internal(err))
	}
	// The report names the kept copy relative to the state directory:
	// its absolute path is sandboxd's state, for the log.
	if want := "the granted file " + host + " was replaced on the host during the run; what the command wrote to it is kept in sandboxd's state directory, as leftovers/host-0"; err.Error() != want {
		t.Errorf("a replaced file: the public sentence is\n%q, want\n%q", err.Error(), want)
	}
	if b, _ := os.ReadFile(host); string(b) != "a new file\n" {
		t.Errorf("the new file was written: %q", b)
	}
	if b, _ := os.ReadFile(host + ".old"); string(b) != "edited on the host\n" {
		t.Errorf("the old file was written: %q", b)
	}
	kept, _ := filepath.Glob(filepath.Join(keep, "*"))
	if len(kept) != 1 {
		t.Fatalf("kept %v", kept)
	}
	if b, _ := os.ReadFile(kept[0]); string(b) != "the command's\n" {
		t.Errorf("kept %q", b)
	}
}
