package runcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
)

// ModelArg is the core's hidden command line that asks the model one
// prompt: a ModelCall on its stdin, a ModelAnswer on its stdout. Only
// sandboxd-run starts it (CoreModels); the key travels on the pipe,
// never in argv or the environment.
const ModelArg = "__model-complete"

// maxAnswer bounds what is read of the core's answer: the client reads
// at most 1 MiB of the model's response, and the answer is its content.
const maxAnswer = 4 << 20

// ModelCall is one prompt for the model reviewer's client, with the
// client's configuration (review/openai.Config's fields) and
// review.Completer's arguments.
type ModelCall struct {
	BaseURL, Model, Key               string
	MaxOutputTokens                   int
	ReasoningEffort, StructuredOutput string
	// Proxy is the proxy the caller's environment names for the
	// endpoint ("": none): the core's own environment is not read.
	Proxy string
	// Timeout is what is left of the review's deadline.
	Timeout      time.Duration
	System, User string
}

// ModelAnswer is the core's answer to a ModelCall: the completion the
// client returned, and its fault when it failed (the sentence safe to
// show, and its class), as review.Completer returns them. Content
// passed the client's validation (review.ParseVerdict) when Fault is
// empty; the asker validates it again.
type ModelAnswer struct {
	Completion review.Completion
	Fault      string `json:",omitempty"`
	Class      string `json:",omitempty"`
}

// coreCompleter is review.Completer through the core beside this
// executable, started anew for each prompt.
type coreCompleter struct {
	call ModelCall
	log  *slog.Logger
	// open opens the core to execute (nil: OpenCore), or says why not.
	open func() (*os.File, string)
}

func (c *coreCompleter) Complete(ctx context.Context, system, user string, validate func(string) error) (review.Completion, error) {
	call := c.call
	call.System, call.User = system, user
	if d, ok := ctx.Deadline(); ok {
		call.Timeout = time.Until(d)
	}
	a, err := c.ask(ctx, call)
	if err != nil {
		if ctx.Err() != nil {
			return review.Completion{}, publicerr.Wrap(&classedFault{"timeout", "model reviewer: no answer before the review's deadline"}, "model reviewer: no answer before the review's deadline")
		}
		c.log.Debug("model reviewer: the core's answer", "err", err)
		return review.Completion{}, publicerr.Wrap(fmt.Errorf("%w: %w", errNoCore, err), "model reviewer: sandboxd's core, which holds the model's client, did not answer (run with -v to log why)")
	}
	if a.Fault != "" {
		f := &classedFault{a.Class, a.Fault}
		return a.Completion, publicerr.Wrap(f, f.sentence)
	}
	if err := validate(a.Completion.Content); err != nil {
		f := &classedFault{"malformed", "model reviewer: the answer was not a valid verdict"}
		return a.Completion, publicerr.Wrap(fmt.Errorf("%w: %w", f, err), f.sentence)
	}
	return a.Completion, nil
}

// ask runs the core with call on its stdin and reads its answer; the
// core is killed when ctx ends.
func (c *coreCompleter) ask(ctx context.Context, call ModelCall) (ModelAnswer, error) {
	open := c.open
	if open == nil {
		open = func() (*os.File, string) {
			f, _, why := OpenCore("sandboxd-run starts it for the model reviewer as whoever runs sandboxd")
			return f, why
		}
	}
	f, why := open()
	if f == nil {
		return ModelAnswer{}, errors.New(why)
	}
	defer f.Close()
	in, err := json.Marshal(call)
	if err != nil {
		return ModelAnswer{}, fmt.Errorf("encode the call: %w", err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), ModelArg)
	cmd.Args[0] = CoreName
	cmd.Env = coreEnv()
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stdout = &limited{w: &out, n: maxAnswer}
	cmd.Stderr = &firstBytes{b: &errOut, n: 4096}
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return ModelAnswer{}, fmt.Errorf("%s: %w (stderr %q)", CoreName, err, errOut.String())
	}
	var a ModelAnswer
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return ModelAnswer{}, fmt.Errorf("%s's answer: %w", CoreName, err)
	}
	if dec.More() {
		return ModelAnswer{}, fmt.Errorf("%s's answer: more than one answer", CoreName)
	}
	return a, nil
}

// limited writes at most n bytes to w, then fails: a core that writes
// more is not answering.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, errors.New("runcmd: the answer is too long")
	}
	l.n -= len(p)
	return l.w.Write(p)
}

// firstBytes keeps the first n bytes written, for the log, and drops
// the rest: what the core says on stderr is no answer either way.
type firstBytes struct {
	b *bytes.Buffer
	n int
}

func (f *firstBytes) Write(p []byte) (int, error) {
	if room := f.n - f.b.Len(); room > 0 {
		f.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// ServeModel is the core's side of ModelArg: read one ModelCall from
// stdin, ask complete, write its ModelAnswer to stdout (a call it cannot
// read is said on stderr). complete is the core's client (review/openai,
// which this package does not link).
func ServeModel(stdin io.Reader, stdout, stderr io.Writer, complete func(ctx context.Context, call ModelCall) (review.Completion, error)) int {
	var call ModelCall
	dec := json.NewDecoder(io.LimitReader(stdin, maxAnswer))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&call); err != nil {
		fmt.Fprintf(stderr, "sandboxd: %s takes a model call on its stdin (sandboxd-run starts it): %v\n", ModelArg, err)
		return exitSandboxd
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(call.Timeout, 0))
	defer cancel()
	c, err := complete(ctx, call)
	a := ModelAnswer{Completion: c}
	if err != nil {
		a.Fault, a.Class = publicerr.Message(err, "model reviewer: failed"), review.FaultClass(err)
		if a.Class == "" {
			a.Class = "error"
		}
	}
	if err := json.NewEncoder(stdout).Encode(a); err != nil {
		return exitSandboxd
	}
	return 0
}
