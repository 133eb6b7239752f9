package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/seccomp"
)

// TestFiltersKept: a program is read (or compiled) once per options and
// kept: the second run neither reads nor needs the caller's cache file.
func TestFiltersKept(t *testing.T) {
	state := t.TempDir()
	spec := &Spec{StateDir: state, UID: os.Getuid(), GID: os.Getgid()}
	f := NewFilters()
	opts := seccomp.Options{Observe: true, UnixSockets: true}
	first, err := f.get(spec, opts)
	if err != nil || len(first) == 0 {
		t.Fatalf("first: %d bytes, %v", len(first), err)
	}
	cached, _ := filepath.Glob(filepath.Join(state, "seccomp", "*.bpf"))
	if len(cached) != 1 {
		t.Fatalf("the caller's cache holds %v", cached)
	}
	// A cache file changed under the process is not read again.
	os.WriteFile(cached[0], []byte("12345678"), 0o600)
	again, err := f.get(spec, opts)
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("second: %d bytes, %v", len(again), err)
	}
	// Other options are another program.
	other, err := f.get(spec, seccomp.Options{Observe: true, UnixSockets: true, UDP: true})
	if err != nil || bytes.Equal(other, first) {
		t.Fatalf("other options: %v, same program %v", err, bytes.Equal(other, first))
	}
	// nil keeps nothing: the caller's cache, as it is, is read.
	var none *Filters
	if b, _ := none.get(spec, opts); !bytes.Equal(b, []byte("12345678")) {
		t.Fatalf("nil Filters did not read the caller's cache")
	}
}

// TestSharedFiltersNeverReadACallersCache: a daemon's Filters serve many
// callers, so a program is compiled in the process: a file a caller wrote
// in its own cache never becomes a filter, its own or anyone else's.
func TestSharedFiltersNeverReadACallersCache(t *testing.T) {
	state := t.TempDir()
	spec := &Spec{StateDir: state, UID: os.Getuid(), GID: os.Getgid()}
	opts := seccomp.Options{Observe: true, UnixSockets: true}
	want, err := NewFilters().get(spec, opts) // compiles and caches it
	if err != nil {
		t.Fatal(err)
	}
	cached, _ := filepath.Glob(filepath.Join(state, "seccomp", "*.bpf"))
	if len(cached) != 1 {
		t.Fatalf("the caller's cache holds %v", cached)
	}
	planted := []byte("12345678") // a program of the caller's choosing
	os.WriteFile(cached[0], planted, 0o600)
	got, err := NewSharedFilters().get(spec, opts)
	if err != nil || bytes.Equal(got, planted) || !bytes.Equal(got, want) {
		t.Fatalf("shared Filters returned %d bytes (planted: %v, compiled: %v), %v", len(got), bytes.Equal(got, planted), bytes.Equal(got, want), err)
	}
}
