package suggest

import (
	"net/netip"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/netdest"
)

// pathNeighbours are the clean absolute names one step from name: a
// child, the parent, siblings, and each byte or rune changed, dropped or
// doubled, and a wildcard in its place.
func pathNeighbours(name string) []string {
	out := []string{path.Join(name, "x"), path.Join(name, "*"), path.Dir(name), name + "x", name + "*", name + " "}
	if name != "/" {
		out = append(out, path.Join(path.Dir(name), "x"), path.Join(path.Dir(name), "*"), path.Join(path.Dir(name), "**"))
	}
	for i := 0; i < len(name) && i < 64; i++ {
		out = append(out, name[:i]+name[i+1:], name[:i]+name[i:i+1]+name[i:], name[:i]+"x"+name[i+1:],
			name[:i]+"?"+name[i+1:], name[:i]+`\`+name[i:])
		if r, n := utf8.DecodeRuneInString(name[i:]); r != utf8.RuneError {
			out = append(out, name[:i]+string(r+1)+name[i+n:], name[:i]+name[i+n:])
		}
	}
	clean := out[:0]
	for _, o := range out {
		// Requests carry clean absolute paths only (the broker refuses
		// any other as malformed).
		if strings.HasPrefix(o, "/") && path.Clean(o) == o {
			clean = append(clean, o)
		}
	}
	return clean
}

// destNeighbours are normalised destinations one step from dest: the
// next and previous port, a parent, a child and a look-alike name, the
// next and previous address.
func destNeighbours(dest string) []string {
	d, err := netdest.ParseHostPort(dest)
	if err != nil {
		return nil
	}
	var out []string
	add := func(host string, port uint16) {
		if o, err := netdest.ParseHost(host, port); err == nil {
			out = append(out, o.String())
		}
	}
	for _, p := range []uint16{d.Port - 1, d.Port + 1, 80, 443} {
		if p != d.Port {
			add(d.Host, p)
		}
	}
	if d.IsIP() {
		for _, a := range []netip.Addr{d.Addr.Next(), d.Addr.Prev()} {
			if a.IsValid() {
				add("["+a.String()+"]", d.Port)
				add(a.String(), d.Port)
			}
		}
		return out
	}
	add("a."+d.Host, d.Port)
	add("x"+d.Host, d.Port)
	add(d.Host+".x", d.Port)
	if _, parent, ok := strings.Cut(d.Host, "."); ok {
		add(parent, d.Port)
	}
	add(strconv.Itoa(int(d.Port))+"."+d.Host, d.Port)
	return out
}
