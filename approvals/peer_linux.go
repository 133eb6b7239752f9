package approvals

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// errNoPeer: the connection's other end is not found among this
// machine's TCP sockets.
var errNoPeer = errors.New("approvals: the connection's peer is not a socket of this machine")

// LoopbackPeerUID is the uid that owns the other end of r's connection:
// the socket whose local address is r's remote one and whose remote
// address is the page's, as the kernel lists it in /proc/net/tcp or
// tcp6. A browser's connection to loopback is a socket of this machine,
// and its uid is the browser's user: a cookie a browser sends to every
// port of 127.0.0.1 (browsers do not keep cookies apart by port), or a
// link taken by another user, is refused unless the browser is the
// session's own user's.
func LoopbackPeerUID(r *http.Request) (int, error) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return -1, errNoPeer
	}
	server, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return -1, fmt.Errorf("approvals: %w", err)
	}
	client, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return -1, fmt.Errorf("approvals: %w", err)
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, err := findSocket(table, client, server)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, errNoPeer) {
			return -1, err
		}
	}
	return -1, errNoPeer
}

// findSocket looks in table for the socket from local to remote.
func findSocket(table string, local, remote netip.AddrPort) (int, error) {
	f, err := os.Open(table)
	if err != nil {
		return -1, fmt.Errorf("approvals: %w", err)
	}
	defer f.Close()
	want := [2]string{procAddr(local), procAddr(remote)}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 || !strings.EqualFold(fs[1], want[0]) || !strings.EqualFold(fs[2], want[1]) {
			continue
		}
		uid, err := strconv.Atoi(fs[7])
		if err != nil {
			return -1, fmt.Errorf("approvals: %s: %w", table, err)
		}
		return uid, nil
	}
	if err := sc.Err(); err != nil {
		return -1, fmt.Errorf("approvals: %w", err)
	}
	return -1, errNoPeer
}

// procAddr is a as /proc/net/tcp writes it: the address as 32-bit words
// in the host's order (little-endian here), hex, then the port, hex.
func procAddr(a netip.AddrPort) string {
	ip := a.Addr()
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	var b []byte
	if ip.Is4() {
		v := ip.As4()
		b = v[:]
	} else {
		v := ip.As16()
		b = v[:]
	}
	out := make([]byte, len(b))
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(out[i:], binary.BigEndian.Uint32(b[i:]))
	}
	return strings.ToUpper(hex.EncodeToString(out)) + fmt.Sprintf(":%04X", a.Port())
}
