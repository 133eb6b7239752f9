package grants

import (
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/netdest"
)

// TestKey: a boundary is its surface, operation, path and destination;
// another attempt, object or caller at it is the same boundary.
func TestKey(t *testing.T) {
	r := Request{Session: "s", Surface: boundary.Filesystem, Operation: boundary.OpReadFile, Path: "/etc/x", ResolvedPath: "/etc/x", Ino: 1, Attempt: 1}
	again := r
	again.Attempt, again.Ino, again.ToolCallID, again.ResolvedPath = 2, 9, "t2", "/real/x"
	if r.Key() != again.Key() {
		t.Errorf("a retry's sighting is another boundary: %+v, %+v", r.Key(), again.Key())
	}
	dest, err := netdest.ParseHostPort("example.org:443")
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []func(*Request){
		func(q *Request) { q.Operation = boundary.OpWriteFile },
		func(q *Request) { q.Path = "/etc/y" },
		func(q *Request) { q.Surface, q.Path, q.Destination = boundary.Network, "", dest },
	} {
		q := r
		other(&q)
		if q.Key() == r.Key() {
			t.Errorf("%+v is the same boundary as %+v", q.Key(), r.Key())
		}
	}
	n := Request{Surface: boundary.Network, Operation: boundary.OpConnect, Destination: dest}
	if k := n.Key(); k.Destination != "example.org:443" {
		t.Errorf("a network request's key names %q", k.Destination)
	}
}
