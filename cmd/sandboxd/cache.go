package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sandboxd/sandboxd/cachedir"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

const cacheUsage = `Usage:
  sandboxd cache list [--json]
  sandboxd cache prune [--json] [--policy FILE] [--max SIZE | --all | ID...]

The private tool caches, one per workspace (GOCACHE, GOMODCACHE, npm,
pip, XDG_CACHE_HOME). prune removes the least recently used ones until
they fit --max (default: limits.cache_size of your policy), every one
with --all, or the ones named; a cache a run is using is never removed.
`

// cacheCommand lists and prunes the private caches.
func cacheCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "prune") {
		fmt.Fprint(stderr, cacheUsage)
		return exitSandboxd
	}
	fs := flag.NewFlagSet("sandboxd cache "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	var max, polFile string
	var all bool
	if args[0] == "prune" {
		fs.StringVar(&max, "max", "", "remove least recently used caches until they take at most SIZE (e.g. 5GiB)")
		fs.BoolVar(&all, "all", false, "remove every cache not in use")
		fs.StringVar(&polFile, "policy", "", "the policy whose limits.cache_size is the default --max")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return exitSandboxd
	}
	caller, err := callerOf(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(session.Public(err)))
		return exitSandboxd
	}
	root := caller.CacheRoot()
	var ents []cachedir.Entry
	switch {
	case args[0] == "list":
		if fs.NArg() > 0 {
			fmt.Fprint(stderr, cacheUsage)
			return exitSandboxd
		}
		ents, err = cachedir.List(root)
	case fs.NArg() > 0:
		if max != "" || all {
			fmt.Fprint(stderr, cacheUsage)
			return exitSandboxd
		}
		ents, err = cachedir.Remove(root, fs.Args())
	default:
		limit := int64(0)
		switch {
		case all && max != "":
			fmt.Fprint(stderr, cacheUsage)
			return exitSandboxd
		case all:
		case max != "":
			var s policy.Size
			if err := s.UnmarshalText([]byte(max)); err != nil {
				fmt.Fprintf(stderr, "sandboxd: --max: %s\n", esc(err.Error()))
				return exitSandboxd
			}
			limit = int64(s)
		default:
			if limit, err = caller.CacheSize(polFile); err != nil {
				fmt.Fprintf(stderr, "sandboxd: %s\n", esc(session.Public(err)))
				return exitSandboxd
			}
		}
		ents, err = cachedir.Prune(root, limit)
	}
	printCaches(stdout, args[0], ents, *asJSON)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: cache %s: %s\n", args[0], esc(err.Error()))
		return 1
	}
	return 0
}

// printCaches shows caches listed or removed.
func printCaches(w io.Writer, verb string, ents []cachedir.Entry, asJSON bool) {
	if asJSON {
		key := map[string]string{"list": "caches", "prune": "removed"}[verb]
		b, _ := json.MarshalIndent(map[string][]cachedir.Entry{key: append([]cachedir.Entry{}, ents...)}, "", "  ")
		fmt.Fprintln(w, string(b))
		return
	}
	var total int64
	for _, e := range ents {
		total += e.Size
		ws := e.Workspace
		if ws == "" {
			ws = "(workspace not recorded)"
		}
		use := ""
		if e.InUse {
			use = "  in use"
		}
		fmt.Fprintf(w, "%s  %9s  %s  %s%s\n", e.ID, humanSize(e.Size), e.LastUsed.Local().Format(time.DateTime), esc(ws), use)
	}
	what := map[string]string{"list": "in all", "prune": "removed"}[verb]
	fmt.Fprintf(w, "%d caches, %s %s\n", len(ents), humanSize(total), what)
}

// humanSize shows bytes in the largest binary unit under which they are
// at least 1, to one decimal.
func humanSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
