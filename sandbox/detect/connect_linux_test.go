package detect

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

func sun(path string) []byte {
	b := binary.NativeEndian.AppendUint16(nil, unix.AF_UNIX)
	return append(b, path...)
}

func TestUnixPath(t *testing.T) {
	for _, c := range []struct {
		addr []byte
		path string
		ok   bool
	}{
		{sun("/tmp/s\x00"), "/tmp/s", true},
		{sun("/tmp/s"), "/tmp/s", true}, // not terminated: the length says
		{sun("rel/s\x00junk"), "rel/s", true},
		{sun("\x00abstract"), "", false},
		{sun(""), "", false}, // unnamed
		{[]byte{1}, "", false},
		{append(binary.NativeEndian.AppendUint16(nil, unix.AF_INET), 1, 2, 3), "", false},
	} {
		path, ok := unixPath(c.addr)
		if path != c.path || ok != c.ok {
			t.Errorf("unixPath(%q) = %q, %v; want %q, %v", c.addr, path, ok, c.path, c.ok)
		}
	}
}

// FuzzConnectAddr: the address a connect names comes from the command's
// memory; reading it never panics, and a pathname is never empty.
func FuzzConnectAddr(f *testing.F) {
	f.Add(sun("/tmp/s\x00"))
	f.Add(sun("\x00x"))
	f.Add([]byte{2, 0, 0, 80, 127, 0, 0, 1})
	f.Add([]byte{10, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseSockaddr(b)
		if p, ok := unixPath(b); ok && p == "" {
			t.Fatalf("empty pathname from %q", b)
		}
	})
}
