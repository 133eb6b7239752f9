package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sandboxd/sandboxd/cachedir"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/publicerr"
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
	switch {
	case len(args) == 0:
		return usageError(stderr, cacheUsage, "")
	case isHelp(args[0]):
		fmt.Fprint(stdout, cacheUsage)
		return 0
	case args[0] != "list" && args[0] != "prune":
		return usageError(stderr, cacheUsage, fmt.Sprintf("unknown cache command %q", args[0]))
	}
	verb := args[0]
	fs := flag.NewFlagSet("sandboxd cache "+verb, flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	var max, polFile string
	var all bool
	if verb == "prune" {
		fs.StringVar(&max, "max", "", "remove least recently used caches until they take at most `SIZE` (e.g. 5GiB)")
		fs.BoolVar(&all, "all", false, "remove every cache not in use")
		fs.StringVar(&polFile, "policy", "", "the policy whose limits.cache_size is the default --max")
	}
	if code, ok := parseFlags(fs, args[1:], cacheUsage, stdout, stderr); !ok {
		return code
	}
	usage := withFlags(cacheUsage, fs)
	limit := int64(0)
	switch {
	case verb == "list":
		if msg := extraArgs("cache list", fs.Args()); msg != "" {
			return usageError(stderr, usage, msg)
		}
	case fs.NArg() > 0 && (max != "" || all), all && max != "":
		return usageError(stderr, usage, "cache prune takes one of --max SIZE, --all and cache IDs")
	case max != "":
		var s policy.Size
		if err := s.UnmarshalText([]byte(max)); err != nil {
			return usageError(stderr, usage, "--max: "+err.Error())
		}
		limit = int64(s)
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(session.Public(err)))
		return exitSandboxd
	}
	root := caller.Layout().Caches()
	var ents []cachedir.Entry
	switch {
	case verb == "list":
		ents, err = cachedir.List(root)
	case fs.NArg() > 0:
		ents, err = cachedir.Remove(root, fs.Args())
	default:
		if !all && max == "" {
			if limit, err = caller.CacheSize(polFile); err != nil {
				fmt.Fprintf(stderr, "sandboxd: %s\n", esc(session.Public(err)))
				return exitSandboxd
			}
		}
		ents, err = cachedir.Prune(root, limit)
	}
	printCaches(stdout, verb, ents, *asJSON)
	if err != nil {
		// A cache's own name is the caller's; anything else about the
		// cache root under sandboxd's state is for the log.
		what := map[string]string{"list": "listed", "prune": "pruned"}[verb]
		msg := publicerr.Message(err, "the caches could not all be "+what+" (the cause is logged above)")
		if !publicerr.Is(err) {
			slog.New(slog.NewTextHandler(stderr, nil)).Error("cache "+verb, "err", err)
		}
		fmt.Fprintf(stderr, "sandboxd: cache %s: %s\n", verb, esc(msg))
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
