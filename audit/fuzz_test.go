package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseRecord: the line parser never panics, accepts a line only in
// the one form Append writes (so encoding what it read gives the line
// back), and agrees with the verifier's prefix reader on seq and prev.
func FuzzParseRecord(f *testing.F) {
	cfg := testConfig(f)
	cfg.CheckpointEvery = 3
	writeLog(f, cfg, 6)
	for _, l := range readLines(f, filepath.Join(cfg.Dir, LogName)) {
		f.Add(l)
	}
	f.Add([]byte(`{"seq":1,"prev":"` + zeroHash + `","hash":"` + zeroHash + `"}`))
	f.Add([]byte(`{"seq":01,"prev":"x"}`))
	f.Add([]byte(`{"seq":1,"prev":"` + zeroHash + `","time":"2026-01-01T00:00:00Z","kind":"decision","kind":"checkpoint"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if flatObject(line) && !json.Valid(line) {
			t.Fatalf("flatObject accepts %q, which is no JSON", line)
		}
		var h lineHead
		headOK := readHead(line, &h)
		r, err := parseRecord(line)
		if err != nil {
			return
		}
		again, err := encodeLine(&r)
		if err != nil || !bytes.Equal(again, line) {
			t.Fatalf("accepted %q, which encodes as %q", line, again)
		}
		if !headOK {
			t.Fatalf("parseRecord accepts %q, the prefix reader does not", line)
		}
		if h.seq != r.Seq || (r.Prev != "" && lineHashHex(h.prev) != r.Prev) || h.stub != (r.Hash != "") {
			t.Fatalf("prefix %+v disagrees with record %+v", h, r)
		}
		if !h.stub && string(h.kind) != string(r.Kind) {
			t.Fatalf("prefix kind %q, record kind %q", h.kind, r.Kind)
		}
	})
}

func lineHashHex(b [32]byte) string {
	var out bytes.Buffer
	const digits = "0123456789abcdef"
	for _, c := range b {
		out.WriteByte(digits[c>>4])
		out.WriteByte(digits[c&15])
	}
	return out.String()
}

// FuzzVerify mutates a signed log (every line signed: it was closed, and
// its head names the last checkpoint) and checks that Verify never
// panics and never accepts a mutation: a byte changed, bytes inserted
// or removed anywhere in it.
func FuzzVerify(f *testing.F) {
	cfg := testConfig(f)
	cfg.CheckpointEvery = 4
	writeLog(f, cfg, 12)
	live := filepath.Join(cfg.Dir, LogName)
	orig, err := os.ReadFile(live)
	if err != nil {
		f.Fatal(err)
	}
	pub, err := ReadPublicKey(filepath.Join(cfg.Dir, PublicKeyName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(10), uint8(0), []byte("x"))
	f.Add(uint32(200), uint8(1), []byte("\n"))
	f.Add(uint32(len(orig)-5), uint8(2), []byte{3})
	f.Add(uint32(0), uint8(2), []byte{200})
	f.Fuzz(func(t *testing.T, at uint32, op uint8, data []byte) {
		mutated := mutate(orig, int(at)%(len(orig)+1), op, data)
		if bytes.Equal(mutated, orig) {
			return
		}
		dir := t.TempDir()
		for _, n := range []string{HeadName} {
			b, _ := os.ReadFile(filepath.Join(cfg.Dir, n))
			os.WriteFile(filepath.Join(dir, n), b, 0o600)
		}
		path := filepath.Join(dir, LogName)
		os.WriteFile(path, mutated, 0o600)
		if _, err := Verify(context.Background(), []string{path}, pub); err == nil {
			t.Fatalf("Verify accepted a mutation (op %d at %d, %q)", op%3, at, data)
		}
	})
}

// mutate changes b at i: op 0 overwrites with data, 1 inserts data, 2
// removes data[0] bytes (at least one).
func mutate(b []byte, i int, op uint8, data []byte) []byte {
	out := append([]byte(nil), b[:i]...)
	switch op % 3 {
	case 0:
		out = append(out, data...)
		if i+len(data) < len(b) {
			out = append(out, b[i+len(data):]...)
		}
	case 1:
		out = append(append(out, data...), b[i:]...)
	default:
		n := 1
		if len(data) > 0 {
			n = int(data[0]) + 1
		}
		out = append(out, b[min(i+n, len(b)):]...)
	}
	return out
}

// A verifier given another key refuses even an untouched log.
func TestVerifyWithAnotherKey(t *testing.T) {
	cfg := testConfig(t)
	writeLog(t, cfg, 2)
	pub, _, _ := ed25519.GenerateKey(nil)
	files, _ := Files(cfg.Dir)
	if _, err := Verify(context.Background(), files, pub); err == nil {
		t.Fatal("Verify accepted a log with another key")
	}
}

func TestFlatObject(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{`{}`, true},
		{`{"a":"b","c":-12,"d":"\u00e9\n\"x\""}`, true},
		{`{"a":1.5}`, false}, // no event field is a float
		{`{"a":{"b":1}}`, false},
		{`{"a":01}`, false},
		{`{"a":"b",}`, false},
		{`{"a":"b"} `, false},
		{`{"a":"b"}}`, false},
		{"{\"a\":\"\x01\"}", false},
		{`{"a":"\x"}`, false},
		{`{"a":"\u12"}`, false},
		{`{"a"}`, false},
		{`{"a":-}`, false},
		{`{"a":"b"`, false},
	} {
		if got := flatObject([]byte(c.in)); got != c.want {
			t.Errorf("flatObject(%s) = %v", c.in, got)
		}
	}
}
