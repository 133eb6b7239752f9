package wire

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRecvKeepsStampOfAnotherBuild: a setup from a build whose messages
// differ (a field of another type) still shows the helper its stamp, so
// the helper can say the builds differ rather than that the message is
// bad.
func TestRecvKeepsStampOfAnotherBuild(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	defer unix.Close(pair[1])
	r := NewReceiver(pair[1])
	for _, tc := range []struct {
		name, packet, stamp string
		bad                 bool
	}{
		{"same shape", `{"kind":"setup","setup":{"stamp":"abc","argv":["true"]}}`, "abc", false},
		{"a field of another type", `{"kind":"setup","setup":{"argv":"true","stamp":"abc","tmp_size":"big"}}`, "abc", true},
		{"no stamp", `{"kind":"setup","setup":{"argv":["true"]}}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := unix.Sendmsg(pair[0], []byte(tc.packet), nil, nil, 0); err != nil {
				t.Fatal(err)
			}
			m, fds, err := r.Recv()
			if (err != nil) != tc.bad || len(fds) != 0 {
				t.Fatalf("Recv: err %v, %d descriptors; want an error: %v", err, len(fds), tc.bad)
			}
			if m.Setup == nil || m.Setup.Stamp != tc.stamp {
				t.Fatalf("Recv: setup %+v, want stamp %q", m.Setup, tc.stamp)
			}
		})
	}
	unix.Shutdown(pair[0], unix.SHUT_WR)
	if _, _, err := r.Recv(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Recv at the end: %v, want os.ErrClosed", err)
	}
}
