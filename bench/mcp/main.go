// Command mcp measures what a bash call through `sandboxd mcp` costs an
// MCP client, next to the same command as a new `sandboxd run` and bare,
// interleaved in one run: one long-lived server answers every call (the
// client is the protocol's own Go SDK, over a stdio pipe).
//
//	go run ./bench/mcp -n 100 [-sandboxd bin/sandboxd]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandboxd/sandboxd/bench/internal/scratch"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
)

// contender is one way to run a command, timed.
type contender struct {
	name string
	run  func() error
	took []time.Duration
}

func main() {
	n := flag.Int("n", 100, "calls per contender")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	flag.Parse()
	if err := run(*n, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "mcp:", err)
		os.Exit(1)
	}
}

func run(n int, bin string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	// The home beside the workspace: one inside it is refused.
	home, cleanHome, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanHome()
	env := append(os.Environ(), "HOME="+home)
	server := exec.Command(bin, "mcp", "--workspace", ws)
	server.Dir, server.Env, server.Stderr = ws, env, os.Stderr
	ctx := context.Background()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: server}, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	call := func(command string) func() error {
		return func() error {
			res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
			if err == nil && res.IsError {
				err = fmt.Errorf("error result: %v", res.Content)
			}
			return err
		}
	}
	execute := func(argv ...string) func() error {
		return func() error {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir, cmd.Env = ws, env
			var out bytes.Buffer
			cmd.Stderr = &out
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%v: %v: %s", argv, err, out.String())
			}
			return nil
		}
	}
	const mib = "yes sandboxd | head -c 1048576"
	cs := []*contender{
		{name: "bash -c true", run: execute("bash", "-c", "true")},
		{name: "sandboxd run -- true (a new process)", run: execute(bin, "run", "--workspace", ws, "--", "true")},
		{name: "sandboxd mcp: bash call `true`", run: call("true")},
		{name: "sandboxd run -c '" + mib + "' > /dev/null", run: execute(bin, "run", "--workspace", ws, "-c", mib)},
		{name: "sandboxd mcp: bash call `" + mib + "` (kept: 64 KiB)", run: call(mib)},
	}
	for i := -3; i < n; i++ {
		for _, c := range cs {
			t := time.Now()
			if err := c.run(); err != nil {
				return fmt.Errorf("%s: %v", c.name, err)
			}
			if i >= 0 {
				c.took = append(c.took, time.Since(t))
			}
		}
	}
	fmt.Print("| command | runs | median | p10 | p90 |\n|---|---|---|---|---|\n")
	for _, c := range cs {
		fmt.Printf("| `%s` | %d | %s | %s | %s |\n", c.name, len(c.took), ms(stats.Median(c.took)), ms(stats.Pct(c.took, 10)), ms(stats.Pct(c.took, 90)))
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
