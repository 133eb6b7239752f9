package netproxy

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync/atomic"

	"github.com/elazarl/goproxy"
	"github.com/sandboxd/sandboxd/netdest"
)

// admit authenticates a request and reads its destination. Every
// request takes its head from the Host tap first, so the tap stays in
// step with the server whatever the outcome.
func (p *Proxy) admit(r *http.Request) (netdest.Dest, *refusal) {
	cc := clientOf(r.Context())
	var h head
	ok := false
	if cc != nil {
		h, ok = cc.tap.next(r.Context())
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

// onConnect decides a CONNECT. On allow, goproxy dials through the
// permit (ctx.Dialer; its own CONNECT dialers are nil) and relays;
// ConnectAccept with no TLSConfig is a plain tunnel, never MITM.
// goproxy replays the bytes the client sent after the CONNECT head.
func (p *Proxy) onConnect(host string, gctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	r := gctx.Req
	gctx.Dialer = refuseDial
	dest, ref := p.admit(r)
	var pm *permit
	if ref == nil {
		cc := clientOf(r.Context())
		pm, ref = p.decide(r.Context(), cc.s, cc, ViaConnect, dest)
	}
	if ref != nil {
		gctx.Resp = p.response(r, ref)
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}, host
	}
	context.AfterFunc(r.Context(), pm.release)
	gctx.UserData = pm
	gctx.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return p.dialPermit(ctx, pm, network, addr)
	}
	return &goproxy.ConnectAction{Action: goproxy.ConnectAccept}, pm.dest.String()
}

func refuseDial(context.Context, string, string) (net.Conn, error) { return nil, errNoPermit }

// connectError answers a CONNECT whose permitted dial failed (goproxy
// closes the connection after).
func (p *Proxy) connectError(w io.Writer, gctx *goproxy.ProxyCtx, err error) {
	ref := p.dialRefusal(gctx, err)
	if werr := p.response(gctx.Req, ref).Write(w); werr != nil {
		p.log.Debug("netproxy: writing a CONNECT refusal", "err", werr)
	}
}

func (p *Proxy) dialRefusal(gctx *goproxy.ProxyCtx, err error) *refusal {
	var re *refusalError
	if errors.As(err, &re) {
		return re.r
	}
	var dest netdest.Dest
	if pm, ok := gctx.UserData.(*permit); ok {
		dest = pm.dest
	}
	p.log.Debug("netproxy: upstream failed", "dest", dest.String(), "err", err)
	return unreachableRefusal(dest, dialReason(err))
}

// onRequest decides one plain-HTTP request (each request on a
// kept-alive connection on its own) and pins it to its permit.
func (p *Proxy) onRequest(r *http.Request, gctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	dest, ref := p.admit(r)
	var pm *permit
	if ref == nil {
		cc := clientOf(r.Context())
		pm, ref = p.decide(r.Context(), cc.s, cc, ViaHTTP, dest)
	}
	if ref != nil {
		return r, p.response(r, ref)
	}
	context.AfterFunc(r.Context(), pm.release)
	gctx.UserData = pm
	out := r.WithContext(context.WithValue(r.Context(), permitKey{}, pm))
	out.URL.Scheme = "http"
	out.URL.Host = dest.String()
	out.URL.User = nil
	out.Host = hostHeader(dest)
	stripHopByHop(out.Header, isUpgrade(out.Header))
	if out.Body != nil && out.Body != http.NoBody {
		out.Body = &countingBody{rc: out.Body, n: &p.stats.up}
	}
	return out, nil
}

// onResponse turns a failed round trip into a refusal and counts the
// response body. Refusals made by onRequest pass through untouched.
func (p *Proxy) onResponse(resp *http.Response, gctx *goproxy.ProxyCtx) *http.Response {
	if _, ok := gctx.UserData.(*permit); !ok {
		return resp
	}
	if resp == nil {
		return p.response(gctx.Req, p.dialRefusal(gctx, gctx.Error))
	}
	resp.Header.Del("X-Sandboxd-Decision")
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// goproxy relays the upgraded stream from the body itself.
		return resp
	}
	stripHopByHop(resp.Header, false)
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &countingBody{rc: resp.Body, n: &p.stats.down}
	}
	return resp
}

// nonProxy answers what goproxy does not see as a proxy request
// (origin form): always refused.
func (p *Proxy) nonProxy(w http.ResponseWriter, r *http.Request) {
	_, ref := p.admit(r)
	if ref == nil {
		ref = malformedRefusal(errors.New("not a proxy request"))
	}
	resp := p.response(r, ref)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
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
// and Upgrade stay for an upgrade (goproxy relays WebSockets).
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
