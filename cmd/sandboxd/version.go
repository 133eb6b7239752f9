package main

import "runtime/debug"

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
