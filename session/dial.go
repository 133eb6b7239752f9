package session

import (
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpproxy"

	"github.com/sandboxd/sandboxd/fsid"
)

// errOwnListener refuses a connection that would reach one of sandboxd's
// own listeners (Config.Reserved).
var errOwnListener = errors.New("session: that address is one of sandboxd's own listeners")

// dialer is how sandboxd connects for caller c: as c (fsid.Dialer, so a
// host firewall's owner rules see c, not root), and never to one of
// sandboxd's own listeners, whatever a policy, an environment or a name
// points at (reserved may be nil: nothing is).
func dialer(c Caller, reserved func(netip.AddrPort) bool) fsid.Dialer {
	d := fsid.Dialer{ID: c.ID()}
	if reserved != nil {
		d.Check = func(ap netip.AddrPort) error {
			if reserved(ap) {
				return errOwnListener
			}
			return nil
		}
	}
	return d
}

// ownListener reports whether a connection to an address could reach one
// of the listeners in reserved: an address on this host (loopback, the
// unspecified address, which the kernel connects to loopback, or one of
// its interfaces' addresses) at a port one of them listens on. Every
// local address at that port is refused, not only the listener's own:
// a listener on the unspecified address answers at all of them, and
// loopback has many spellings (127.0.0.2, ::ffff:127.0.0.1, 0.0.0.0).
func ownListener(reserved []netip.AddrPort) func(netip.AddrPort) bool {
	reserved = slices.Clone(reserved)
	return func(ap netip.AddrPort) bool {
		a := ap.Addr().Unmap().WithZone("")
		for _, l := range reserved {
			if l.Port() != ap.Port() {
				continue
			}
			// The host's addresses are read only for a reserved port: a
			// daemon's interfaces may change while it runs.
			if a == l.Addr().Unmap() || a.IsLoopback() || a.IsUnspecified() || slices.Contains(localAddrs(), a) {
				return true
			}
		}
		return false
	}
}

// callerProxy is the proxy the caller's environment names for a URL, by
// the rules of http.ProxyFromEnvironment (HTTPS_PROXY, HTTP_PROXY,
// NO_PROXY, either case; none under CGI), read from c.Env: in a daemon
// the process's own environment is root's.
func callerProxy(c Caller) func(*url.URL) (*url.URL, error) {
	either := func(k string) string {
		if v := c.Getenv(k); v != "" {
			return v
		}
		return c.Getenv(strings.ToLower(k))
	}
	cfg := httpproxy.Config{HTTPProxy: either("HTTP_PROXY"), HTTPSProxy: either("HTTPS_PROXY"),
		NoProxy: either("NO_PROXY"), CGI: c.Getenv("REQUEST_METHOD") != ""}
	return cfg.ProxyFunc()
}
