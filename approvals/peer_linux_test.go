package approvals

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"testing"
)

// The uid of a real loopback connection's other end is found in the
// kernel's socket tables: this process's, over IPv4 and IPv6.
func TestLoopbackPeerUID(t *testing.T) {
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Skipf("%s: %v", network, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			uid, err := LoopbackPeerUID(r)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			io.WriteString(w, strconv.Itoa(uid))
		})}
		go srv.Serve(ln)
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if string(b) != strconv.Itoa(os.Getuid()) {
			t.Fatalf("%s: the peer's uid %q, want %d", network, b, os.Getuid())
		}
	}
	if got := procAddr(netip.MustParseAddrPort("127.0.0.1:8080")); got != "0100007F:1F90" {
		t.Fatalf("procAddr %q", got)
	}
}
