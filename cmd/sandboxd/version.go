package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "sandboxd (unknown build)"
	}
	rev, dirty := "", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = info.Main.Version
	}
	return "sandboxd " + rev + dirty + " " + info.GoVersion
}

const versionUsage = `Usage: sandboxd version (or sandboxd --version)

Print sandboxd's revision (+dirty when built from a modified tree) and
the Go release that built it.
`

// versionCommand is `sandboxd version` and `sandboxd --version`.
func versionCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandboxd version", flag.ContinueOnError)
	if code, ok := parseFlags(fs, args, versionUsage, stdout, stderr); !ok {
		return code
	}
	if msg := extraArgs("version", fs.Args()); msg != "" {
		return usageError(stderr, versionUsage, msg)
	}
	fmt.Fprintln(stdout, version())
	return 0
}
