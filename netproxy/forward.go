package netproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/sandboxd/sandboxd/netdest"
)

// ServeHTTP is the proxy's one handler: CONNECT tunnels, absolute-form
// plain HTTP, and a refusal for anything else.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.serveConnect(w, r)
	case r.URL.IsAbs():
		p.serveForward(w, r)
	default:
		p.nonProxy(w, r)
	}
}

// workContext is what a request's decision and dial run under: its
// values, cancelled when Serve ends, but not when the client half-closes
// (net/http cancels the request's own context then, and `printf ... |
// nc -N` sends its request and a FIN at once). The hold bounds it.
func workContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	if cc := clientOf(r.Context()); cc != nil {
		stop := context.AfterFunc(cc.s.ctx, cancel)
		return ctx, func() { stop(); cancel() }
	}
	return ctx, cancel
}

// serveConnect decides a CONNECT, dials through its permit, answers 200
// and relays. Bytes the client sent after the CONNECT head (a TLS
// ClientHello in the same write) are in the server's read buffer and go
// upstream first.
func (p *Proxy) serveConnect(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := workContext(r)
	defer cancel()
	dest, ref := p.admit(ctx, r)
	if ref != nil {
		p.writeRefusal(w, r, ref)
		return
	}
	up := p.open(ctx, clientOf(r.Context()), ViaConnect, dest, httpAnswer(w, r))
	if up == nil {
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		p.writeRefusal(w, r, malformedRefusal(errors.New("the connection cannot carry a tunnel")))
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = client.Close()
		_ = up.Close()
		return
	}
	tunnelBoth(client, brw.Reader, up)
}

// tunnelBoth relays client and up both ways, each direction
// half-closing the other side at its end, and closes both when both are
// done. early is the client's bytes already buffered by the server.
func tunnelBoth(client net.Conn, early *bufio.Reader, up net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if n := bufferedLen(early); n > 0 {
			b, _ := early.Peek(n)
			if _, err := up.Write(b); err != nil {
				_ = closeWrite(up, up)
				return
			}
		}
		_, _ = io.Copy(up, client)
		_ = closeWrite(up, up)
		_ = closeRead(client)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(client, up)
		_ = closeWrite(client, client)
		_ = closeRead(up)
	}()
	wg.Wait()
	_ = client.Close()
	_ = up.Close()
}

// bufferedLen is how many bytes r holds (none for nil).
func bufferedLen(r *bufio.Reader) int {
	if r == nil {
		return 0
	}
	return r.Buffered()
}

// serveForward decides one plain-HTTP request (each request on a
// kept-alive connection on its own) and forwards it through its permit:
// the transport's only dialer spends the permit on exactly the decided
// destination.
func (p *Proxy) serveForward(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := workContext(r)
	defer cancel()
	dest, ref := p.admit(ctx, r)
	if ref != nil {
		p.writeRefusal(w, r, ref)
		return
	}
	p.forward(ctx, w, r, dest, ViaHTTP)
}

// forward decides one admitted plain-HTTP request for dest and forwards
// it through its permit.
func (p *Proxy) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, dest netdest.Dest, via Via) {
	tell := httpAnswer(w, r)
	pm := p.permitFor(ctx, clientOf(r.Context()), via, dest, tell)
	if pm == nil {
		return
	}
	defer pm.release()
	out := r.Clone(context.WithValue(ctx, permitKey{}, pm))
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.URL.User = "http", dest.String(), nil
	out.Host = hostHeader(dest)
	upgrade := isUpgrade(out.Header)
	stripHopByHop(out.Header, upgrade)
	if r.ContentLength == 0 {
		out.Body = nil
	} else if out.Body != nil && out.Body != http.NoBody {
		out.Body = &countingBody{rc: out.Body, n: &p.stats.up}
	}
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		p.refuse(p.dialRefusal(pm, err), true, tell)
		return
	}
	defer resp.Body.Close()
	resp.Header.Del("X-Sandboxd-Decision")
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if !upgrade {
			p.writeRefusal(w, r, unreachableRefusal(dest, "the origin switched protocols without being asked"))
			return
		}
		stripHopByHop(resp.Header, true)
		p.relayUpgrade(w, resp, pm)
		return
	}
	stripHopByHop(resp.Header, false)
	p.copyResponse(w, resp)
}

// copyResponse sends resp's head, body and trailers to the client; a
// body of unknown length is flushed as it comes (server-sent events,
// streamed logs). A body the origin cut short is cut short for the
// client too: the connection is aborted, never ended as if complete.
func (p *Proxy) copyResponse(w http.ResponseWriter, resp *http.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	stripTrailers(resp.Trailer)
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	var dst io.Writer = w
	if resp.ContentLength < 0 {
		dst = flushWriter{w: w, rc: http.NewResponseController(w)}
	}
	buf := make([]byte, copyBuf)
	if _, err := io.CopyBuffer(dst, &countingBody{rc: resp.Body, n: &p.stats.down}, buf); err != nil {
		panic(http.ErrAbortHandler) // net/http closes the connection without ending the body
	}
	stripTrailers(resp.Trailer) // the origin's trailers arrive with the body's end
	for k, v := range resp.Trailer {
		h[k] = v
	}
}

// stripTrailers drops trailers that must not cross: hop-by-hop and
// proxy headers, and our own decision header.
func stripTrailers(t http.Header) {
	t.Del("X-Sandboxd-Decision")
	stripHopByHop(t, false)
}

// flushWriter flushes after every write.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}

// relayUpgrade carries a protocol switch (a WebSocket): the 101 goes to
// the client and both streams are relayed until both end, as a tunnel
// (bytes counted, closed when idle). The upgraded connection is the
// permit's, to the decided destination.
func (p *Proxy) relayUpgrade(w http.ResponseWriter, resp *http.Response, pm *permit) {
	up, ok := resp.Body.(io.ReadWriteCloser)
	hj, hok := w.(http.Hijacker)
	if !ok || !hok || pm.up == nil || pm.client == nil {
		http.Error(w, "sandboxd: the upgrade could not be relayed", http.StatusBadGateway)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer client.Close()
	defer up.Close()
	p.startTunnel(pm)
	resp.Body = nil
	if err := resp.Write(brw.Writer); err != nil || brw.Flush() != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, io.MultiReader(io.LimitReader(brw.Reader, int64(brw.Reader.Buffered())), client))
		_ = closeWrite(pm.up, up) // the origin sees the client's end
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(client, up)
		_ = closeWrite(client, client)
	}()
	wg.Wait()
}

// writeRefusal counts a refusal and answers r with it through the server.
func (p *Proxy) writeRefusal(w http.ResponseWriter, r *http.Request, ref *refusal) {
	p.refuse(ref, false, httpAnswer(w, r))
}

// httpAnswer is the HTTP ways' answer: the refusal's response, written
// through the server.
func httpAnswer(w http.ResponseWriter, r *http.Request) answer {
	return func(ref *refusal, _ bool) {
		resp := ref.response(r)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}
}
