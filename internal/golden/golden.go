package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update flag of every test binary that imports golden.
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Check compares got with testdata/name, or rewrites the file with
// -update.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// Block compares got with the part of file (a path relative to the test's
// directory) between the lines "<!-- name -->" and "<!-- /name -->", or
// rewrites that part with -update: a generated list kept inside a
// document people edit.
func Block(t testing.TB, file, name string, got []byte) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	open, end := []byte("<!-- "+name+" -->\n"), []byte("<!-- /"+name+" -->")
	i := bytes.Index(b, open)
	j := bytes.Index(b, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no block %q ... %q", file, open, end)
	}
	i += len(open)
	if *update {
		out := append(append(append([]byte{}, b[:i]...), got...), b[j:]...)
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(b[i:j], got) {
		t.Fatalf("%s's block %s differs from what the code says (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", file, name, got, b[i:j])
	}
}
