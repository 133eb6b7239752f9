// Command testreport runs `go test -json` and reports what plain `go test`
// would (each package's result line and the output of the tests that
// failed), then names the slowest tests, so that a slow run says where
// its time went. `make test` runs it; it exits with go test's status.
//
// Usage:
//
//	testreport [-json FILE] [-slowest N] [-go GO] [--] [go test flags] [packages]
//
// -json keeps go test's own event stream in FILE.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command: its arguments, its output, its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("testreport", flag.ContinueOnError)
	flags.SetOutput(stderr)
	jsonOut := flags.String("json", "", "also write go test's JSON events to `file`")
	slowest := flags.Int("slowest", 10, "name the `n` slowest tests at the end")
	goTool := flags.String("go", "go", "the go `command`")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	var events io.Writer = io.Discard
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			fmt.Fprintf(stderr, "testreport: %v\n", err)
			return 2
		}
		defer f.Close()
		events = f
	}
	cmd := exec.Command(*goTool, append([]string{"test", "-json"}, flags.Args()...)...)
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testreport: %v\n", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testreport: %v\n", err)
		return 2
	}
	r := newReport(stdout)
	readErr := r.read(io.TeeReader(pipe, events))
	// Whatever happened to the stream, go test must not block on it.
	io.Copy(io.Discard, pipe)
	code := exitCode(cmd.Wait(), stderr)
	r.writeSlowest(*slowest)
	if readErr != nil {
		fmt.Fprintf(stderr, "testreport: reading go test's events: %v\n", readErr)
		code = max(code, 1)
	}
	return code
}

// exitCode is go test's exit status: 0, its own code, or 1 when it
// ended some other way (a signal, a failed wait).
func exitCode(err error, stderr io.Writer) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(stderr, "testreport: go test: %v\n", err)
		return 1
	}
}
