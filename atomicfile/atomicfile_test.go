package atomicfile

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func writers() map[string]func(string, []byte, fs.FileMode) error {
	return map[string]func(string, []byte, fs.FileMode) error{"WriteFile": WriteFile, "WriteFileSync": WriteFileSync}
}

// names lists dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for name, write := range writers() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "state.json")
			if err := write(p, []byte("one"), 0o666); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o644 {
				t.Errorf("new file mode %v, want perm less the umask (0644)", st.Mode().Perm())
			}
			// Replacing takes the new perm, not the old file's mode.
			if err := write(p, []byte("two"), 0o600); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			st, _ = os.Stat(p)
			if string(b) != "two" || st.Mode().Perm() != 0o600 {
				t.Errorf("after replace: %q mode %v, want \"two\" 0600", b, st.Mode().Perm())
			}
			if got := names(t, dir); len(got) != 1 {
				t.Errorf("directory holds %q, want only the target", got)
			}
		})
	}
}

// A symlink at the target is replaced, never written through.
func TestWriteFileReplacesSymlink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	os.WriteFile(outside, []byte("keep"), 0o600)
	p := filepath.Join(dir, "target")
	os.Symlink(outside, p)
	if err := WriteFile(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("written through the symlink: %q", b)
	}
	if st, _ := os.Lstat(p); !st.Mode().IsRegular() {
		t.Errorf("target is %v, want a regular file", st.Mode())
	}
}

// A failed write leaves the target as it was and no temporary file.
func TestWriteFileFailureLeavesNothing(t *testing.T) {
	for name, write := range writers() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "target")
			os.MkdirAll(filepath.Join(p, "child"), 0o755) // a file cannot replace a non-empty directory
			if err := write(p, []byte("x"), 0o600); err == nil {
				t.Fatal("replacing a directory succeeded")
			}
			if got := names(t, dir); len(got) != 1 || got[0] != "target" {
				t.Errorf("directory holds %q after a failure", got)
			}
			if err := write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
				t.Error("writing into a missing directory succeeded")
			}
			if err := write(dir+"/", []byte("x"), 0o600); err == nil {
				t.Error("a path without a file name was accepted")
			}
		})
	}
}

// Readers see the old contents or the new, never a mix.
func TestWriteFileAtomic(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	a, b := bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)
	if err := WriteFile(p, a, 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data := a
			if i%2 == 1 {
				data = b
			}
			if err := WriteFile(p, data, 0o600); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 200; i++ {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("read %d bytes that are neither version", len(got))
		}
	}
	close(stop)
	wg.Wait()
}

func TestRemoveLeftovers(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ID.journal")
	WriteFile(p, []byte("j"), 0o600)
	for _, n := range []string{".ID.journal.tmp-0a1b2c", ".ID.journal.tmp-ffffff", ".other.tmp-000000", "ID.journal.tmp"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o600)
	}
	if err := RemoveLeftovers(p); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(names(t, dir), " ")
	if got != ".other.tmp-000000 ID.journal ID.journal.tmp" {
		t.Errorf("left %q", got)
	}
}

func ExampleWriteFileSync() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "filter.bpf")
	if err := WriteFileSync(p, []byte("compiled"), 0o600); err != nil {
		fmt.Println(err)
	}
	b, _ := os.ReadFile(p)
	fmt.Println(string(b))
	// Output: compiled
}
