package netproxy

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"sync/atomic"

	"github.com/sandboxd/sandboxd/netdest"
)

// admit authenticates a request and reads its destination. Every
// request takes its head from the Host tap first, so the tap stays in
// step with the server whatever the outcome.
func (p *Proxy) admit(ctx context.Context, r *http.Request) (netdest.Dest, *refusal) {
	cc := clientOf(r.Context())
	var h head
	ok := false
	if cc != nil {
		h, ok = cc.tap.next(ctx)
	}
	if !p.authorized(r.Header.Values("Proxy-Authorization")) {
		return netdest.Dest{}, authRefusal()
	}
	switch {
	case !ok || h.bad || h.method != r.Method || h.uri != r.RequestURI:
		return netdest.Dest{}, malformedRefusal(errors.New("the request head could not be read"))
	case h.clte:
		return netdest.Dest{}, malformedRefusal(errors.New("both Content-Length and Transfer-Encoding"))
	case len(h.hosts) > 1:
		return netdest.Dest{}, malformedRefusal(errors.New("more than one Host header"))
	}
	host := ""
	if len(h.hosts) == 1 {
		host = h.hosts[0]
		if host == "" {
			return netdest.Dest{}, malformedRefusal(errors.New("empty Host header"))
		}
	}
	dest, err := parseTarget(r.Method, r.RequestURI, host)
	if err != nil {
		return netdest.Dest{}, malformedRefusal(err)
	}
	// net/http parsed the same target; a disagreement means one of the
	// two readers is being fooled.
	u := r.URL
	if r.Method == http.MethodConnect {
		ok = u.Host == r.RequestURI && u.User == nil && u.Path == ""
	} else {
		auth := r.RequestURI[len("http://"):]
		if i := strings.IndexAny(auth, "/?"); i >= 0 {
			auth = auth[:i]
		}
		ok = strings.EqualFold(u.Scheme, "http") && u.User == nil && u.Opaque == "" &&
			strings.EqualFold(auth, u.Host)
	}
	if !ok {
		return netdest.Dest{}, malformedRefusal(errors.New("ambiguous request target"))
	}
	return dest, nil
}

// authorized checks Proxy-Authorization: exactly one Basic credential
// for user "sandboxd" and this run's token, compared in constant time.
func (p *Proxy) authorized(vals []string) bool {
	if len(vals) != 1 {
		return false
	}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got, p.wantAuth) == 1
}

// dialRefusal is the answer to a permitted dial that failed: the
// refusal the dialer chose (a reserved address), or unreachable.
func (p *Proxy) dialRefusal(pm *permit, err error) *refusal {
	var re *refusalError
	if errors.As(err, &re) {
		return re.r
	}
	p.log.Debug("netproxy: upstream failed", "dest", pm.dest.String(), "err", err)
	return unreachableRefusal(pm.dest, dialReason(err))
}

// nonProxy answers a request that is not a proxy request (origin form):
// always refused, after the same admission every request gets (the Host
// tap stays in step).
func (p *Proxy) nonProxy(w http.ResponseWriter, r *http.Request) {
	_, ref := p.admit(r.Context(), r)
	if ref == nil {
		ref = malformedRefusal(errors.New("not a proxy request"))
	}
	p.writeRefusal(w, r, ref)
}

// hostHeader is the Host sent upstream: the decided destination.
func hostHeader(d netdest.Dest) string {
	if d.Port != 80 {
		return d.String()
	}
	if d.Addr.Is6() {
		return "[" + d.Host + "]"
	}
	return d.Host
}

func isUpgrade(h http.Header) bool {
	return headerHasToken(h, "Connection", "upgrade") && h.Get("Upgrade") != ""
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h[name] {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(t), token) {
				return true
			}
		}
	}
	return false
}

// stripHopByHop removes what must not cross the proxy: every Proxy-*
// header, the headers Connection names, Keep-Alive and TE. Connection
// and Upgrade stay for an upgrade (relayUpgrade carries WebSockets).
func stripHopByHop(h http.Header, upgrade bool) {
	for _, v := range h["Connection"] {
		for t := range strings.SplitSeq(v, ",") {
			t = textproto.TrimString(t)
			if t != "" && !(upgrade && strings.EqualFold(t, "upgrade")) {
				h.Del(t)
			}
		}
	}
	for k := range h {
		if len(k) >= 6 && strings.EqualFold(k[:6], "Proxy-") {
			delete(h, k)
		}
	}
	h.Del("Keep-Alive")
	h.Del("Te")
	if !upgrade {
		h.Del("Connection")
		h.Del("Upgrade")
	}
}

// countingBody counts a plain-HTTP body's bytes as they pass.
type countingBody struct {
	rc io.ReadCloser
	n  *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return b.rc.Close() }
