package netproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
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

// serveConnect decides a CONNECT, dials through its permit, answers 200
// and relays. Bytes the client sent after the CONNECT head (a TLS
// ClientHello in the same write) are in the server's read buffer and go
// upstream first.
func (p *Proxy) serveConnect(w http.ResponseWriter, r *http.Request) {
	dest, ref := p.admit(r)
	var pm *permit
	cc := clientOf(r.Context())
	if ref == nil {
		pm, ref = p.decide(r.Context(), cc.s, cc, ViaConnect, dest)
	}
	if ref != nil {
		p.writeRefusal(w, r, ref)
		return
	}
	defer pm.release()
	up, err := p.dialPermit(r.Context(), pm, "tcp", pm.dest.String())
	if err != nil {
		p.writeRefusal(w, r, p.dialRefusal(pm, err))
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
		if n := early.Buffered(); n > 0 {
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

// serveForward decides one plain-HTTP request (each request on a
// kept-alive connection on its own) and forwards it through its permit:
// the transport's only dialer spends the permit on exactly the decided
// destination.
func (p *Proxy) serveForward(w http.ResponseWriter, r *http.Request) {
	dest, ref := p.admit(r)
	var pm *permit
	if ref == nil {
		cc := clientOf(r.Context())
		pm, ref = p.decide(r.Context(), cc.s, cc, ViaHTTP, dest)
	}
	if ref != nil {
		p.writeRefusal(w, r, ref)
		return
	}
	defer pm.release()
	out := r.Clone(context.WithValue(r.Context(), permitKey{}, pm))
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
		p.writeRefusal(w, r, p.dialRefusal(pm, err))
		return
	}
	defer resp.Body.Close()
	resp.Header.Del("X-Sandboxd-Decision")
	if resp.StatusCode == http.StatusSwitchingProtocols && upgrade {
		p.relayUpgrade(w, resp)
		return
	}
	stripHopByHop(resp.Header, false)
	p.copyResponse(w, resp)
}

// copyResponse sends resp's head, body and trailers to the client; a
// body of unknown length is flushed as it comes (server-sent events,
// streamed logs).
func (p *Proxy) copyResponse(w http.ResponseWriter, resp *http.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	var dst io.Writer = w
	if resp.ContentLength < 0 {
		dst = flushWriter{w: w, rc: http.NewResponseController(w)}
	}
	buf := make([]byte, copyBuf)
	_, _ = io.CopyBuffer(dst, &countingBody{rc: resp.Body, n: &p.stats.down}, buf)
	for k, v := range resp.Trailer {
		h[k] = v
	}
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
// the client and both streams are relayed until they end. The upgraded
// connection is the permit's, to the decided destination.
func (p *Proxy) relayUpgrade(w http.ResponseWriter, resp *http.Response) {
	up, ok := resp.Body.(io.ReadWriteCloser)
	hj, hok := w.(http.Hijacker)
	if !ok || !hok {
		http.Error(w, "sandboxd: the upgrade could not be relayed", http.StatusBadGateway)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer client.Close()
	resp.Body = nil
	if err := resp.Write(brw.Writer); err != nil || brw.Flush() != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(up, io.MultiReader(io.LimitReader(brw.Reader, int64(brw.Reader.Buffered())), client))
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, up)
		done <- struct{}{}
	}()
	<-done
	_ = up.Close()
	_ = client.Close()
	<-done
}

// writeRefusal answers r with a refusal through the server.
func (p *Proxy) writeRefusal(w http.ResponseWriter, r *http.Request, ref *refusal) {
	resp := p.response(r, ref)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
