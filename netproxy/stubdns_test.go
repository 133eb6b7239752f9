package netproxy

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// query builds a DNS query with one question.
func query(t testing.TB, id uint16, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rawQuery builds a query whose name is the given labels, as bytes on
// the wire (no checks: over-long labels, any byte).
func rawQuery(id uint16, labels []string, typ dnsmessage.Type, class dnsmessage.Class, qdcount uint16) []byte {
	msg := binary.BigEndian.AppendUint16(nil, id)
	msg = append(msg, 0x01, 0x00) // RD
	msg = binary.BigEndian.AppendUint16(msg, qdcount)
	msg = append(msg, 0, 0, 0, 0, 0, 0)
	for i := uint16(0); i < max(qdcount, 1); i++ {
		for _, l := range labels {
			msg = append(msg, byte(len(l)))
			msg = append(msg, l...)
		}
		msg = append(msg, 0)
		msg = binary.BigEndian.AppendUint16(msg, uint16(typ))
		msg = binary.BigEndian.AppendUint16(msg, uint16(class))
	}
	return msg
}

// parsed is a stub reply, read back.
type parsed struct {
	rcode dnsmessage.RCode
	id    uint16
	addrs []netip.Addr
	n     int // answer records of any type
}

func parseReply(t testing.TB, b []byte) parsed {
	t.Helper()
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	if !h.Response {
		t.Fatalf("reply is not a response")
	}
	out := parsed{rcode: h.RCode, id: h.ID}
	if err := p.SkipAllQuestions(); err != nil {
		t.Fatal(err)
	}
	for {
		rh, err := p.AnswerHeader()
		if err != nil {
			break
		}
		out.n++
		if rh.Type == dnsmessage.TypeA {
			a, err := p.AResource()
			if err != nil {
				t.Fatal(err)
			}
			out.addrs = append(out.addrs, netip.AddrFrom4(a.A))
		} else if err := p.SkipAnswer(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestStubAnswers(t *testing.T) {
	n := newStubNames(0)
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	cases := []struct {
		name  string
		msg   []byte
		rcode dnsmessage.RCode
		addrs []netip.Addr
	}{
		{"first name", query(t, 1, "example.com.", dnsmessage.TypeA), dnsmessage.RCodeSuccess, []netip.Addr{a("198.18.0.1")}},
		{"the same name again", query(t, 2, "example.com.", dnsmessage.TypeA), dnsmessage.RCodeSuccess, []netip.Addr{a("198.18.0.1")}},
		{"case folds", query(t, 3, "EXAMPLE.Com.", dnsmessage.TypeA), dnsmessage.RCodeSuccess, []netip.Addr{a("198.18.0.1")}},
		{"another name", query(t, 4, "git.example.org.", dnsmessage.TypeA), dnsmessage.RCodeSuccess, []netip.Addr{a("198.18.0.2")}},
		{"single label", query(t, 5, "db.", dnsmessage.TypeA), dnsmessage.RCodeSuccess, []netip.Addr{a("198.18.0.3")}},
		{"AAAA is empty", query(t, 6, "example.com.", dnsmessage.TypeAAAA), dnsmessage.RCodeSuccess, nil},
		{"MX is empty", query(t, 7, "example.com.", dnsmessage.TypeMX), dnsmessage.RCodeSuccess, nil},
		{"HTTPS is empty", query(t, 8, "example.com.", dnsmessage.Type(65)), dnsmessage.RCodeSuccess, nil},
		{"TXT refused", query(t, 9, "example.com.", dnsmessage.TypeTXT), dnsmessage.RCodeRefused, nil},
		{"CNAME refused", query(t, 10, "example.com.", dnsmessage.TypeCNAME), dnsmessage.RCodeRefused, nil},
		{"localhost", query(t, 11, "localhost.", dnsmessage.TypeA), dnsmessage.RCodeSuccess, []netip.Addr{a("127.0.0.1")}},
		{"under localhost", query(t, 12, "app.localhost.", dnsmessage.TypeA), dnsmessage.RCodeSuccess, []netip.Addr{a("127.0.0.1")}},
		{"IPv4 literal", query(t, 13, "10.0.0.1.", dnsmessage.TypeA), dnsmessage.RCodeRefused, nil},
		{"numeric loopback", query(t, 14, "127.0.0.1.", dnsmessage.TypeA), dnsmessage.RCodeRefused, nil},
		{"inet_aton spelling", query(t, 15, "0x7f000001.", dnsmessage.TypeA), dnsmessage.RCodeRefused, nil},
		{"underscore", rawQuery(16, []string{"_dmarc", "example", "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeRefused, nil},
		{"CRLF", rawQuery(17, []string{"a\r\nb", "example", "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeRefused, nil},
		{"NUL", rawQuery(18, []string{"a\x00b", "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeRefused, nil},
		{"space", rawQuery(19, []string{"a b", "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeRefused, nil},
		// x/net's parser refuses a dot inside a label.
		{"dot inside a label", rawQuery(20, []string{"a.b", "test"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeFormatError, nil},
		{"leading hyphen", rawQuery(21, []string{"-a", "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeRefused, nil},
		{"label of 63", rawQuery(22, []string{strings.Repeat("a", 63), "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeSuccess, []netip.Addr{a("198.18.0.4")}},
		{"root", rawQuery(23, nil, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeRefused, nil},
		{"class CHAOS", rawQuery(24, []string{"version", "bind"}, dnsmessage.TypeTXT, dnsmessage.ClassCHAOS, 1), dnsmessage.RCodeRefused, nil},
		{"two questions", rawQuery(25, []string{"a", "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 2), dnsmessage.RCodeRefused, nil},
		{"no question", rawQuery(26, nil, dnsmessage.TypeA, dnsmessage.ClassINET, 0)[:12], dnsmessage.RCodeFormatError, nil},
		{"label of 64", rawQuery(27, []string{strings.Repeat("a", 64), "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1), dnsmessage.RCodeFormatError, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := n.answer(c.msg)
			if out == nil {
				t.Fatal("no reply")
			}
			r := parseReply(t, out)
			if r.id != binary.BigEndian.Uint16(c.msg) {
				t.Errorf("reply id %d, want the query's", r.id)
			}
			if r.rcode != c.rcode {
				t.Errorf("rcode %v, want %v", r.rcode, c.rcode)
			}
			if len(r.addrs) != len(c.addrs) || r.n != len(c.addrs) {
				t.Fatalf("answers %v (%d records), want %v", r.addrs, r.n, c.addrs)
			}
			for i := range r.addrs {
				if r.addrs[i] != c.addrs[i] {
					t.Errorf("answer %v, want %v", r.addrs[i], c.addrs[i])
				}
			}
		})
	}
	// Not queries: no reply at all.
	resp := query(t, 30, "example.com.", dnsmessage.TypeA)
	resp[2] |= 0x80
	notify := query(t, 31, "example.com.", dnsmessage.TypeA)
	notify[2] |= 4 << 3 // opcode NOTIFY
	for name, msg := range map[string][]byte{"a response": resp, "short": []byte("GET /"), "empty": nil} {
		if out := n.answer(msg); out != nil {
			t.Errorf("%s got a reply", name)
		}
	}
	if r := parseReply(t, n.answer(notify)); r.rcode != dnsmessage.RCodeNotImplemented {
		t.Errorf("NOTIFY: rcode %v, want NOTIMP", r.rcode)
	}
	if name, ok := n.name(netip.MustParseAddr("198.18.0.2")); !ok || name != "git.example.org" {
		t.Errorf("198.18.0.2 names %q, %v", name, ok)
	}
	if _, ok := n.name(netip.MustParseAddr("198.18.0.200")); ok {
		t.Error("an address never given names something")
	}
}

// TestStubNeverReuses gives addresses to more names than a /24 holds:
// each is new, in the range, and never ends in .0 or .255.
func TestStubNeverReuses(t *testing.T) {
	n := newStubNames(0)
	seen := map[netip.Addr]string{}
	for i := range 1000 {
		name := "host" + strings.Repeat("x", i%7) + "-" + string(rune('a'+i%26)) + "-" + itoa(i) + ".test"
		a, err := n.addr(name)
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := seen[a]; ok {
			t.Fatalf("%v given to %s and %s", a, other, name)
		}
		seen[a] = name
		if b := a.As4(); !stubPrefix.Contains(a) || b[3] == 0 || b[3] == 255 {
			t.Fatalf("%s got %v", name, a)
		}
		if again, _ := n.addr(name); again != a {
			t.Fatalf("%s got %v then %v", name, a, again)
		}
	}
}

func itoa(i int) string { return netip.AddrFrom4([4]byte{0, 0, byte(i >> 8), byte(i)}).String() }

// TestStubFull: once the table is full a new name is refused, and names
// already given keep their addresses.
func TestStubFull(t *testing.T) {
	n := newStubNames(2)
	for i, name := range []string{"a.test.", "b.test."} {
		r := parseReply(t, n.answer(query(t, uint16(i), name, dnsmessage.TypeA)))
		if r.rcode != dnsmessage.RCodeSuccess || len(r.addrs) != 1 {
			t.Fatalf("%s: %+v", name, r)
		}
	}
	if r := parseReply(t, n.answer(query(t, 9, "c.test.", dnsmessage.TypeA))); r.rcode != dnsmessage.RCodeRefused || len(r.addrs) != 0 {
		t.Errorf("a third name: %+v, want REFUSED and no address", r)
	}
	if r := parseReply(t, n.answer(query(t, 10, "a.test.", dnsmessage.TypeA))); len(r.addrs) != 1 || r.addrs[0] != netip.MustParseAddr("198.18.0.1") {
		t.Errorf("a.test after the table filled: %+v", r)
	}
	// The default bound, and the range's: 2^17 addresses less the .0
	// and .255 of each /24, then nothing.
	if got := newStubNames(0).left; got != DefaultStubNames {
		t.Errorf("the default table holds %d names, want %d", got, DefaultStubNames)
	}
	huge := newStubNames(1 << 20)
	given := 0
	for ; ; given++ {
		if _, err := huge.addr("n" + strconv.Itoa(given) + ".test"); err != nil {
			break
		}
	}
	if want := 1<<17 - 2*512; given != want {
		t.Errorf("the whole range gave %d addresses, want %d", given, want)
	}
}

// TestServeDNS answers over a real UDP socket, and stops with its context.
func TestServeDNS(t *testing.T) {
	h := newHarness(t, newFakeDecider())
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.p.ServeDNS(ctx, pc) }()
	c, err := net.Dial("udp4", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(query(t, 77, "registry.npmjs.org.", dnsmessage.TypeA)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	k, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if r := parseReply(t, buf[:k]); r.id != 77 || len(r.addrs) != 1 || !stubPrefix.Contains(r.addrs[0]) {
		t.Errorf("reply %+v", r)
	}
	if got := h.p.Counters().DNSAnswers; got != 1 {
		t.Errorf("DNSAnswers = %d, want 1", got)
	}
	if q := h.res.log(); len(q) != 0 {
		t.Errorf("the stub asked the resolver: %v", q)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeDNS: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeDNS did not return")
	}
}

// FuzzStubAnswer: no input panics; a reply parses, answers the query's
// id, and holds at most one address, which is the stub's (or loopback
// for the localhost names) and the same for the same name.
func FuzzStubAnswer(f *testing.F) {
	f.Add(query(f, 1, "example.com.", dnsmessage.TypeA))
	f.Add(query(f, 2, "example.com.", dnsmessage.TypeAAAA))
	f.Add(rawQuery(3, []string{"a\r\nb", "com"}, dnsmessage.TypeA, dnsmessage.ClassINET, 1))
	f.Add(rawQuery(4, []string{"x", "y"}, dnsmessage.TypeA, dnsmessage.ClassINET, 3))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1})
	n := newStubNames(64)
	f.Fuzz(func(t *testing.T, msg []byte) {
		out := n.answer(msg)
		if out == nil {
			return
		}
		r := parseReply(t, out)
		if len(msg) >= 2 && r.id != binary.BigEndian.Uint16(msg) {
			t.Fatalf("id %d for a query with id %d", r.id, binary.BigEndian.Uint16(msg))
		}
		if len(r.addrs) > 1 || r.n != len(r.addrs) {
			t.Fatalf("answers %v (%d records)", r.addrs, r.n)
		}
		for _, a := range r.addrs {
			if !stubPrefix.Contains(a) && a != netip.MustParseAddr("127.0.0.1") {
				t.Fatalf("answer %v", a)
			}
			if stubPrefix.Contains(a) {
				name, ok := n.name(a)
				if !ok {
					t.Fatalf("%v was answered but names nothing", a)
				}
				if again, _ := n.addr(name); again != a {
					t.Fatalf("%s: %v then %v", name, a, again)
				}
			}
		}
	})
}
