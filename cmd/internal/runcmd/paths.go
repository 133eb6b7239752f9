package runcmd

import (
	"flag"
	"io"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/daemon/client"
)

// DaemonSocket is the daemon's socket a client uses: $SANDBOXD_SOCKET,
// else the default.
func DaemonSocket(getenv func(string) string) string {
	if s := getenv("SANDBOXD_SOCKET"); filepath.IsAbs(s) {
		return filepath.Clean(s)
	}
	return client.DefaultSocket
}

// HiddenPaths are sandboxd's paths no run may read: the daemon's socket
// directory, where every caller's token is (session.Config.Hidden).
func HiddenPaths(getenv func(string) string) []string {
	return []string{filepath.Dir(DaemonSocket(getenv))}
}

// WithFlags is usage followed by fs's flags, when it has any.
func WithFlags(usage string, fs *flag.FlagSet) string {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if b.Len() == 0 {
		return usage
	}
	return usage + "\nFlags:\n" + b.String()
}
