package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testConfig is a log in a new directory under t's temporary one, with
// its key beside it; timers long enough not to fire in a test.
func testConfig(t testing.TB) Config {
	t.Helper()
	base := t.TempDir()
	return Config{Dir: filepath.Join(base, "log"), KeyFile: filepath.Join(base, "audit.key"), CheckpointAfter: time.Hour}
}

// decision is a realistic decision event (about 600 bytes on its line).
func decision(uid, i int) Event {
	return Event{Kind: KindDecision, UID: &uid, Session: "0b6f1c9e-5a1d-4f3e-9d2c-1f7e8a9b0c3d", Agent: "claude-code",
		Command: "npm install --save-dev typescript@5.9 && npx tsc -p tsconfig.build.json", Cwd: "/home/dev/src/webapp",
		Surface: "network", Operation: "connect", Target: "registry.npmjs.org:443",
		RequestHash: "9f2c1b7e4d3a5f6e8b0c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708", Outcome: "allow", Source: "model",
		Risk: "low", Authorization: "the user asked to install the TypeScript compiler",
		Rationale: "Installing a pinned dev dependency from the public npm registry matches the user's request.",
		ReviewMS:  int64(800 + i%700), Note: fmt.Sprintf("event %d", i)}
}

// writeLog appends n decisions to a log opened with cfg and closes it.
func writeLog(t testing.TB, cfg Config, n int) {
	t.Helper()
	ctx := context.Background()
	l, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append(ctx, decision(1000+i%2, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func mustVerify(t testing.TB, dir string) Summary {
	t.Helper()
	pub, err := ReadPublicKey(filepath.Join(dir, PublicKeyName))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Verify(context.Background(), files, pub)
	if err != nil {
		t.Fatalf("verify %s: %v", dir, err)
	}
	return s
}

func verifyDir(t testing.TB, dir string) (Summary, error) {
	t.Helper()
	pub, err := ReadPublicKey(filepath.Join(dir, PublicKeyName))
	if err != nil {
		t.Fatal(err)
	}
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	return Verify(context.Background(), files, pub)
}

// readLines is path's lines without their newlines; the last one keeps
// no trace of whether it had one (tests cut it on purpose).
func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func writeLines(t testing.TB, path string, lines [][]byte) {
	t.Helper()
	var b []byte
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the regular files of src into a new directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func lineHash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// rechain rewrites every line after lines[from] so that the chain links
// again (seq and prev), signing each checkpoint with key: what a forger
// without the log's key can do after changing a record.
func rechain(t testing.TB, lines [][]byte, from int, key ed25519.PrivateKey) {
	t.Helper()
	for i := from + 1; i < len(lines); i++ {
		r, err := parseRecord(lines[i])
		if err != nil {
			t.Fatalf("rechain line %d: %v", i, err)
		}
		prev, err := parseRecord(lines[i-1])
		if err != nil {
			t.Fatalf("rechain line %d: %v", i-1, err)
		}
		r.Seq, r.Prev = prev.Seq+1, lineHash(lines[i-1])
		if r.Checkpoint != nil {
			r.Checkpoint.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, checkpointMessage(r.Checkpoint.Chain, r.Seq, r.Prev, r.Time)))
		}
		if lines[i], err = encodeLine(&r); err != nil {
			t.Fatal(err)
		}
	}
}

// problemOf is err as a *Problem, failing t when it is not one.
func problemOf(t testing.TB, err error) *Problem {
	t.Helper()
	var p *Problem
	if !errors.As(err, &p) {
		t.Fatalf("want a *Problem, got %v", err)
	}
	return p
}

func mode(t testing.TB, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// kindsOf lists the kinds of a file's lines.
func kindsOf(t testing.TB, lines [][]byte) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		r, err := parseRecord(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(r.Kind))
	}
	return out
}

func hasPrefixAny(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
