package sandbox

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
)

// nameFiles are the files that send every name lookup of the command to
// the run's stub resolver (with capture): /etc/resolv.conf naming
// 127.0.0.1, /etc/hosts holding only the loopback names and the host
// name, and /etc/nsswitch.conf's hosts line as "files dns" (no
// systemd-resolved, mDNS or other module that would ask elsewhere over a
// socket the run cannot reach). Each is shown in place of the host's
// file, at the path a symlink leads to; a file the host lacks is not
// made: resolvers then default to 127.0.0.1 anyway. The helper shows
// them (SetupMsg.Shown).
func nameFiles() []wire.ShownFile {
	host, _ := os.Hostname()
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if host != "" && host != "localhost" && validHostname(host) {
		hosts += "127.0.1.1\t" + host + "\n"
	}
	var out []wire.ShownFile
	add := func(path string, data func(old []byte) []byte) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return
		}
		st, err := os.Stat(real)
		if err != nil || !st.Mode().IsRegular() {
			return
		}
		old, _ := os.ReadFile(real)
		out = append(out, wire.ShownFile{Path: real, Data: data(old)})
	}
	add("/etc/resolv.conf", func([]byte) []byte {
		return []byte("# sandboxd: every name goes to the run's stub resolver\nnameserver 127.0.0.1\noptions edns0 trust-ad\n")
	})
	add("/etc/hosts", func([]byte) []byte { return []byte(hosts) })
	add("/etc/nsswitch.conf", nsswitchHosts)
	return out
}

// nsswitchHosts is nsswitch.conf with its hosts line "files dns".
func nsswitchHosts(old []byte) []byte {
	lines := strings.SplitAfter(string(old), "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), "hosts:") {
			lines[i], found = "hosts: files dns\n", true
		}
	}
	if !found {
		lines = append(lines, "\nhosts: files dns\n")
	}
	return []byte(strings.Join(lines, ""))
}

// validHostname reports whether s is safe to write into /etc/hosts.
func validHostname(s string) bool {
	for _, c := range s {
		if !(c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return len(s) <= 253
}
