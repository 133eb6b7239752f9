package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
			es := []openedException{{source: src, host: h}, {source: src}, {}}
			if err := writeBack(es); err != nil {
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
