package openai

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxRedirects bounds same-origin redirects (a POST to an API should get none).
const maxRedirects = 3

// limitTransport bounds every response body at max bytes and refuses a 2xx
// response not labelled application/json before anything reads it.
type limitTransport struct {
	next http.RoundTripper
	max  int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, fmt.Errorf("openai: content length %d over %d: %w", resp.ContentLength, t.max, errOversized)
	}
	if resp.StatusCode/100 == 2 && !isJSON(resp.Header.Get("Content-Type")) {
		resp.Body.Close()
		return nil, fmt.Errorf("openai: HTTP %d: %w", resp.StatusCode, errContentType)
	}
	resp.Body = &limitBody{rc: resp.Body, left: t.max}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach next.
func (t *limitTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// limitBody fails with errOversized once more than left bytes arrive, so a
// huge body costs at most the limit plus one read buffer.
type limitBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errOversized
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errOversized
	}
	return n, err
}

func (b *limitBody) Close() error { return b.rc.Close() }

// httpClient returns the client Complete uses: cfg.HTTPClient (or a new
// one of ours) with its transport wrapped in limitTransport and redirects
// kept on the request's own origin. cfg.HTTPClient itself is not modified.
func httpClient(cfg Config, maxBody int64) *http.Client {
	var c http.Client
	if cfg.HTTPClient != nil {
		c = *cfg.HTTPClient
	} else {
		c.Transport = newTransport(cfg.Dial, cfg.Proxy)
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &limitTransport{next: next, max: maxBody}
	c.CheckRedirect = sameOrigin(c.CheckRedirect)
	return &c
}

// newTransport is the transport of a client of our own: the caller's
// dialer and proxy (never the process's environment), bounded dial, TLS
// and headers; the whole exchange is bounded by the caller's ctx.
func newTransport(dial func(context.Context, string, string) (net.Conn, error), proxy func(*http.Request) (*url.URL, error)) *http.Transport {
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Transport{
		Proxy: proxy,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, dialTimeout)
			defer cancel()
			return dial(ctx, network, addr)
		},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           4,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// dialTimeout bounds one connect (name lookup included).
const dialTimeout = 10 * time.Second

// sameOrigin refuses a redirect that leaves the original scheme and host
// (the Authorization header must not travel), then defers to next.
func sameOrigin(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
		}
		first := via[0].URL
		if len(via) > maxRedirects || !strings.EqualFold(req.URL.Scheme, first.Scheme) ||
			!strings.EqualFold(req.URL.Host, first.Host) {
			return &redirectError{status: status}
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}
