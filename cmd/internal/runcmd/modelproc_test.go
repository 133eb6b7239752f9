package runcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
)

// fakeCoreEnv names what the test binary, executed as the core
// (ModelArg), does.
const fakeCoreEnv = "RUNCMD_TEST_FAKE_CORE"

const allowVerdict = `{"outcome":"allow","risk_level":"low","user_authorization":"unknown","rationale":"fine"}`

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == ModelArg {
		os.Exit(fakeCore(os.Getenv(fakeCoreEnv)))
	}
	os.Exit(m.Run())
}

// fakeCore is the core as each test wants it.
func fakeCore(mode string) int {
	switch mode {
	case "garbage":
		fmt.Println("not an answer")
		return 0
	case "two":
		fmt.Println(`{"Completion":{"Content":"x"}}`)
		fmt.Println(`{"Completion":{"Content":"y"}}`)
		return 0
	case "crash":
		return 2
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "huge":
		fmt.Print(`{"Completion":{"Content":"` + strings.Repeat("a", maxAnswer) + `"}}`)
		return 0
	}
	// Whatever the core says on stderr (GODEBUG's traces, say) is no
	// matter.
	fmt.Fprint(os.Stderr, strings.Repeat("chatter\n", 4096))
	return ServeModel(os.Stdin, os.Stdout, os.Stderr, func(ctx context.Context, call ModelCall) (review.Completion, error) {
		seen := strings.Contains(strings.Join(append(os.Args, os.Environ()...), "\n"), call.Key)
		switch {
		case mode == "fault":
			return review.Completion{PromptTokens: 7}, publicerr.Wrap(&classedFault{"auth", "the endpoint refused"}, "model reviewer: the endpoint refused the credentials (HTTP 401)")
		case seen:
			return review.Completion{}, errors.New("the key was in argv or the environment")
		case mode == "invalid":
			return review.Completion{Content: "allow, surely"}, nil
		}
		if _, err := review.ParseVerdict(call.System + call.User); err != nil || call.Key != "sk-test-key" || call.Model != "m" {
			return review.Completion{}, fmt.Errorf("the call did not arrive whole: %+v %v", call, err)
		}
		return review.Completion{Content: allowVerdict, PromptTokens: 9, CompletionTokens: 3}, nil
	})
}

// testCompleter asks this test binary, as the core, in mode.
func testCompleter(t *testing.T, mode string) *coreCompleter {
	t.Setenv(fakeCoreEnv, mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &coreCompleter{call: ModelCall{Model: "m", Key: "sk-test-key"}, log: slog.New(slog.DiscardHandler),
		open: func() (*os.File, string) {
			f, err := os.Open(exe)
			if err != nil {
				return nil, err.Error()
			}
			return f, ""
		}}
}

func validVerdict(content string) error {
	_, err := review.ParseVerdict(content)
	return err
}

// The core's answer is the completion; the key goes on the pipe only.
func TestCoreCompleterAnswers(t *testing.T) {
	c := testCompleter(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := c.Complete(ctx, allowVerdict[:40], allowVerdict[40:], validVerdict)
	if err != nil || got.Content != allowVerdict || got.PromptTokens != 9 || got.CompletionTokens != 3 {
		t.Fatalf("Complete = %+v, %v", got, err)
	}
}

// Anything short of one answer the verdict's parser accepts is the
// reviewer's fault, with a sentence that is sandboxd's own; the core's
// own fault keeps its sentence and class.
func TestCoreCompleterFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		mode, sentence, class string
	}{
		{"garbage", "did not answer", ""},
		{"two", "did not answer", ""},
		{"crash", "did not answer", ""},
		{"huge", "did not answer", ""},
		{"invalid", "not a valid verdict", "malformed"},
		{"fault", "refused the credentials (HTTP 401)", "auth"},
		{"sleep", "no answer before the review's deadline", "timeout"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c := testCompleter(t, tc.mode)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := c.Complete(ctx, "s", "u", validVerdict)
			if err == nil {
				t.Fatal("no error")
			}
			if msg := publicerr.Message(err, ""); !strings.Contains(msg, tc.sentence) {
				t.Fatalf("sentence %q, want one containing %q (err %v)", msg, tc.sentence, err)
			}
			if tc.class != "" && review.FaultClass(err) != tc.class {
				t.Fatalf("class %q, want %q", review.FaultClass(err), tc.class)
			}
		})
	}
}

// ServeModel takes one well-formed call and nothing else.
func TestServeModelRefusesGarbage(t *testing.T) {
	var out strings.Builder
	called := false
	code := ServeModel(strings.NewReader(`{"Model":"m","Extra":1}`), &out, io.Discard, func(context.Context, ModelCall) (review.Completion, error) {
		called = true
		return review.Completion{}, nil
	})
	if code == 0 || called || out.Len() != 0 {
		t.Fatalf("code %d, called %v, out %q", code, called, out.String())
	}
	b, _ := json.Marshal(ModelCall{Model: "m", Timeout: time.Second})
	code = ServeModel(strings.NewReader(string(b)), &out, io.Discard, func(context.Context, ModelCall) (review.Completion, error) {
		return review.Completion{Content: "c"}, nil
	})
	var a ModelAnswer
	if code != 0 || json.Unmarshal([]byte(out.String()), &a) != nil || a.Completion.Content != "c" || a.Fault != "" {
		t.Fatalf("code %d, answer %q", code, out.String())
	}
}
