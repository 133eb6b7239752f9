package netproxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"
)

const benchChunk = 64 << 20 // bytes per iteration

// sink serves two kinds of connection: "u" (read everything, answer
// one byte at EOF) and "d" (send benchChunk bytes, close).
func newSink(b testing.TB) string {
	return acceptEach(b, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 256<<10)
		if _, err := io.ReadFull(c, buf[:1]); err != nil {
			return
		}
		if buf[0] == 'u' {
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			_, _ = c.Write([]byte{1})
			return
		}
		for left := benchChunk; left > 0; left -= len(buf) {
			if _, err := c.Write(buf[:min(left, len(buf))]); err != nil {
				return
			}
		}
	})
}

func BenchmarkTunnelThroughput(b *testing.B) {
	sink := newSink(b)
	_, port, _ := net.SplitHostPort(sink)
	dec := newFakeDecider("127.0.0.1:" + port)
	h := newHarness(b, dec)
	dialers := map[string]func() (net.Conn, io.Reader, error){
		"direct": func() (net.Conn, io.Reader, error) {
			c, err := net.Dial("tcp", sink)
			return c, c, err
		},
		"proxy": func() (net.Conn, io.Reader, error) {
			c, br, err := h.connect(sink)
			return c, br, err
		},
	}
	for _, dir := range []string{"up", "down"} {
		for _, via := range []string{"direct", "proxy"} {
			b.Run(dir+"/"+via, func(b *testing.B) {
				b.SetBytes(benchChunk)
				buf := make([]byte, 256<<10)
				for b.Loop() {
					c, r, err := dialers[via]()
					if err != nil {
						b.Fatal(err)
					}
					if dir == "up" {
						benchUp(b, c, r, buf)
					} else {
						benchDown(b, c, r, buf)
					}
					c.Close()
				}
			})
		}
	}
}

func benchUp(b *testing.B, c net.Conn, r io.Reader, buf []byte) {
	if _, err := c.Write([]byte{'u'}); err != nil {
		b.Fatal(err)
	}
	for left := benchChunk; left > 0; left -= len(buf) {
		if _, err := c.Write(buf[:min(left, len(buf))]); err != nil {
			b.Fatal(err)
		}
	}
	_ = c.(interface{ CloseWrite() error }).CloseWrite()
	if _, err := io.ReadFull(r, buf[:1]); err != nil {
		b.Fatal(err)
	}
}

func benchDown(b *testing.B, c net.Conn, r io.Reader, buf []byte) {
	if _, err := c.Write([]byte{'d'}); err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		m, err := r.Read(buf)
		n += m
		if err != nil {
			break
		}
	}
	if n != benchChunk {
		b.Fatalf("read %d", n)
	}
}

// BenchmarkNewConnection is a CONNECT to an allowed (cached)
// destination and one echoed byte, from dial to close.
func BenchmarkNewConnection(b *testing.B) {
	e := newEcho(b)
	dec := newFakeDecider("127.0.0.1:" + e.port())
	h := newHarness(b, dec)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		c, br, err := h.connect("127.0.0.1:" + e.port())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write([]byte{'x'}); err != nil {
			b.Fatal(err)
		}
		if _, err := br.ReadByte(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		c.Close()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkPlainHTTPThroughput fetches benchChunk bytes of a plain-HTTP
// response through the proxy (absolute-form GET) and directly.
func BenchmarkPlainHTTPThroughput(b *testing.B) {
	zero := make([]byte, 1<<20)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(benchChunk))
		for left := benchChunk; left > 0; left -= len(zero) {
			if _, err := w.Write(zero[:min(left, len(zero))]); err != nil {
				return
			}
		}
	}))
	b.Cleanup(origin.Close)
	_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
	h := newHarness(b, newFakeDecider("127.0.0.1:"+port))
	clients := map[string]*http.Client{
		"direct": {Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}},
		"proxy":  h.client(testToken),
	}
	clients["proxy"].Timeout = time.Minute
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			b.SetBytes(benchChunk)
			buf := make([]byte, 256<<10)
			for b.Loop() {
				resp, err := clients[via].Get(origin.URL + "/")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
				resp.Body.Close()
				if err != nil || n != benchChunk {
					b.Fatalf("read %d: %v", n, err)
				}
			}
		})
	}
}
