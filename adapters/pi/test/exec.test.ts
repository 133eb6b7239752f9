// pi's bash operations backed by sandboxd (src/exec.ts): through a fake
// daemon (root: its socket must be root's), the client-driven retry,
// timeouts, aborts and questions; with the daemon down, the embedded
// `sandboxd run`, here a small fake sandboxd script written per test.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import type * as http from "node:http";
import * as path from "node:path";
import { test } from "node:test";
import { Client, currentUmask, type ExecLine, type Report } from "../src/daemon.ts";
import { createOperations, type ExecDeps, type RunContext, type UI } from "../src/exec.ts";
import { b64, FakeDaemon, json, line, ndjson, NEEDS_ROOT, type Seen, sleep, tempDir } from "./fake-daemon.ts";

const uid = process.getuid?.() ?? -1;
const ENV = { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" };

// ---- a pi that records -------------------------------------------------

/** recordingUI answers pi's select as a confirm would: yes picks the
 * option that acts ("Allow once", or "Deny now" where an allow cannot
 * stand), no the other. It records the dialog's first line as the title,
 * the rest as the message, and the options in the order offered. */
function recordingUI(answer: boolean | (() => Promise<boolean>) = true) {
	const notes: [string, string | undefined][] = [];
	const asked: { title: string; message: string; options: string[]; opts?: { signal?: AbortSignal; timeout?: number } }[] = [];
	const ui: UI = {
		async select(text, options, opts) {
			const nl = text.indexOf("\n");
			asked.push({ title: nl < 0 ? text : text.slice(0, nl), message: nl < 0 ? "" : text.slice(nl + 1), options, opts });
			const yes = await (typeof answer === "function" ? answer() : answer);
			if (yes === undefined) return undefined;
			return options.includes("Allow once") ? (yes ? "Allow once" : "Deny") : yes ? "Deny now" : "Leave it open";
		},
		notify(message, type) {
			notes.push([message, type]);
		},
	};
	return { ui, notes, asked };
}

function runContext(over: Partial<RunContext> = {}): RunContext {
	return { sessionId: "sess-1", intent: "build the project", denials: { count: 0, faults: 0 }, retried: { grants: [], granted: [] }, ...over };
}

/** output collects onData's chunks. */
function output() {
	const chunks: Buffer[] = [];
	return { onData: (b: Buffer) => void chunks.push(Buffer.from(b)), text: () => Buffer.concat(chunks).toString("utf8") };
}

/** deps whose daemon is the given client, or down; warnOnce says a key's
 * message once, as the extension's does, and records every call. */
function execDeps(daemon: Client | string, sandboxd = "/nonexistent/sandboxd") {
	const warnCalls: string[] = [];
	const warned: string[] = [];
	let asked = 0;
	const deps: ExecDeps = {
		daemon: async () => {
			asked++;
			return typeof daemon === "string" ? { down: daemon } : { client: daemon };
		},
		sandboxd,
		retries: 1,
		warnOnce(key, message) {
			warnCalls.push(key);
			if (!warnCalls.slice(0, -1).includes(key)) warned.push(message);
		},
	};
	return { deps, warnCalls, warned, asked: () => asked };
}

// ---- the fake daemon's exec answers ----------------------------------

type Answer = (res: http.ServerResponse, body: string) => void | Promise<void>;

/** execAnswers answers the n-th exec with answers[n] (the last repeats). */
function execAnswers(d: FakeDaemon, ...answers: Answer[]): void {
	let n = 0;
	d.on("POST", "/v1/exec", (res, body) => answers[Math.min(n++, answers.length - 1)](res, body));
}

/** stream answers an exec with these lines and ends it. */
function stream(...lines: unknown[]): Answer {
	return (res) => {
		ndjson(res);
		res.end(lines.map(line).join(""));
	};
}

function report(over: Partial<Report> = {}): Report {
	return { exit_code: 0, attempts: 1, boundaries: [], ...over };
}

async function withDaemon(fn: (d: FakeDaemon, c: Client) => Promise<void>): Promise<void> {
	const d = await FakeDaemon.start();
	try {
		const c = new Client({ socket: d.socket, uid, timeoutMs: 2_000 });
		await c.connect();
		await fn(d, c);
	} finally {
		await d.stop();
	}
}

const execBodies = (d: FakeDaemon) => d.requests("POST", "/v1/exec").map((s: Seen) => JSON.parse(s.body) as Record<string, unknown>);

// ---- through the daemon --------------------------------------------------

test("a command runs through the daemon's exec with the run's context", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		execAnswers(d, stream({ type: "started", exec: "e1" }, { type: "stdout", data: b64("built\n") }, { type: "stderr", data: b64("warn\n") }, { type: "report", report: report({ exit_code: 2 }) }));
		const { deps } = execDeps(c);
		const { ui } = recordingUI();
		const out = output();
		const got = await createOperations(deps, () => runContext({ ui })).exec("make test", "/var/lib", { onData: out.onData, env: ENV, timeout: 7 });
		assert.deepEqual(got, { exitCode: 2 });
		assert.equal(out.text(), "built\nwarn\n");
		assert.deepEqual(execBodies(d), [
			{
				argv: ["bash", "-c", "make test"],
				command: "make test",
				env: ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"],
				cwd: "/var/lib",
				umask: currentUmask(),
				session: "sess-1",
				agent: "pi",
				intent: "build the project",
				retries: 1,
				retry: "client",
				questions: true,
				timeout_ms: 7000,
			},
		]);
		// No session, no intent, no timeout: left out, not sent empty.
		await createOperations(deps, () => runContext({ sessionId: "", intent: "" })).exec("true", "/", { onData: () => {}, env: ENV });
		const second = execBodies(d)[1];
		for (const k of ["session", "intent", "timeout_ms"]) assert.equal(k in second, false, k);
		assert.equal(second.questions, false);
	});
});

test("the client-driven retry: the grants presented once, the user told what was granted and by whom", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		const first = report({
			exit_code: 1,
			boundaries: [
				{ attempt: 1, surface: "filesystem", operation: "write_file", path: "/var/lib/app/cache", decision: "allow", source: "reviewer", rationale: "the build writes its cache there" },
				{ attempt: 1, surface: "network", operation: "connect", destination: "proxy.golang.org:443", decision: "allow", source: "client" },
			],
			retry: { grants: ["g-1", "g-2"], expires_in_ms: 30_000 },
		});
		const second = report({ exit_code: 0, attempts: 2, boundaries: first.boundaries });
		execAnswers(
			d,
			stream({ type: "started", exec: "e1" }, { type: "stdout", data: b64("attempt one\n") }, { type: "report", report: first }),
			stream({ type: "started", exec: "e2" }, { type: "stdout", data: b64("attempt two\n") }, { type: "report", report: second }),
		);
		const { deps } = execDeps(c);
		const { ui, notes } = recordingUI();
		const run = runContext({ ui });
		const out = output();
		const got = await createOperations(deps, () => run).exec("go build ./...", "/var/lib", { onData: out.onData, env: ENV });
		assert.deepEqual(got, { exitCode: 0 });
		const [one, two] = execBodies(d);
		assert.equal(execBodies(d).length, 2, "exactly one retry");
		assert.equal("grants" in one, false);
		assert.deepEqual(two, { ...one, grants: ["g-1", "g-2"] }, "the same request, plus the grants");
		assert.equal(notes.length, 1);
		assert.equal(notes[0][1], "info");
		assert.match(notes[0][0], /write_file \/var\/lib\/app\/cache — granted by the model reviewer: the build writes its cache there/);
		assert.match(notes[0][0], /connect proxy\.golang\.org:443 — granted by a person, answering in pi/);
		const text = out.text();
		const marker = "[sandboxd] retrying once with the access granted: write_file /var/lib/app/cache, connect proxy.golang.org:443";
		assert.ok(text.indexOf("attempt one") < text.indexOf(marker) && text.indexOf(marker) < text.indexOf("attempt two"), text);
		assert.equal(run.denials.count, 0);
		assert.deepEqual(run.retried, { grants: ["g-1", "g-2"], granted: ["write_file /var/lib/app/cache", "connect proxy.golang.org:443"] }, "kept for the tool's details");
	});
});

test("the retry without a UI to tell: still once, no questions", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		const first = report({ boundaries: [{ attempt: 1, surface: "filesystem", operation: "write_file", path: "/var/lib/x", decision: "allow", source: "policy" }], retry: { grants: ["g"], expires_in_ms: 1000 } });
		execAnswers(d, stream({ type: "report", report: first }), stream({ type: "report", report: report({ attempts: 2, exit_code: 4 }) }));
		const got = await createOperations(execDeps(c).deps, () => runContext()).exec("make", "/var/lib", { onData: () => {}, env: ENV });
		assert.deepEqual(got, { exitCode: 4 });
		const bodies = execBodies(d);
		assert.equal(bodies.length, 2);
		assert.equal(bodies[0].questions, false);
		assert.deepEqual(bodies[1].grants, ["g"]);
	});
});

test("denials reach the model in the output, faults told apart and counted", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		execAnswers(
			d,
			stream({
				type: "report",
				report: report({
					exit_code: 1,
					boundaries: [
						{ attempt: 1, surface: "filesystem", operation: "write_file", path: "/root/.bashrc", decision: "deny", source: "hard-deny", rationale: "a start-up file" },
						{ attempt: 1, surface: "network", operation: "connect", destination: "example.org:443", decision: "deny", source: "error", rationale: "the model did not answer" },
					],
				}),
			}),
		);
		const run = runContext();
		const out = output();
		assert.deepEqual(await createOperations(execDeps(c).deps, () => run).exec("x", "/var/lib", { onData: out.onData, env: ENV }), { exitCode: 1 });
		assert.deepEqual(run.denials, { count: 2, faults: 1 });
		assert.match(out.text(), /write_file \/root\/\.bashrc: denied by sandboxd's fixed rules/);
		assert.match(out.text(), /will be denied too/);
		assert.match(out.text(), /not a denial by a reviewer/);
		assert.match(out.text(), /connect example\.org:443: nobody: the reviewer failed/);
	});
});

test("a report with an error, or a refused exec, is an error; nothing runs embedded", { skip: NEEDS_ROOT }, async () => {
	const dir = tempDir("refused");
	try {
		const fake = writeFakeSandboxd(dir);
		await withDaemon(async (d, c) => {
			execAnswers(d, stream({ type: "report", report: report({ error: "the workspace is locked" }) }));
			const { deps } = execDeps(c, fake);
			await assert.rejects(createOperations(deps, () => runContext()).exec("make", "/var/lib", { onData: () => {}, env: ENV }), /^Error: sandboxd could not run the command: the workspace is locked$/);
			execAnswers(d, (res) => json(res, 429, { error: { code: "busy", message: "too many runs of yours" } }));
			await assert.rejects(createOperations(deps, () => runContext()).exec("make", "/var/lib", { onData: () => {}, env: ENV }), /the daemon refused: too many runs of yours/);
			execAnswers(d, (res) => {
				ndjson(res);
				res.write(line({ type: "started", exec: "e" }));
				setTimeout(() => res.socket?.destroy(), 10);
			});
			await assert.rejects(createOperations(deps, () => runContext()).exec("make", "/var/lib", { onData: () => {}, env: ENV }));
		});
		assert.equal(fs.existsSync(path.join(dir, "args")), false, "no fallback to `sandboxd run` once the daemon took the command");
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test("a run that timed out throws pi's timeout error", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		execAnswers(d, stream({ type: "stdout", data: b64("partial") }, { type: "report", report: report({ exit_code: 143, timed_out: true }) }));
		const out = output();
		await assert.rejects(createOperations(execDeps(c).deps, () => runContext()).exec("sleep 99", "/var/lib", { onData: out.onData, env: ENV, timeout: 5 }), (err: Error) => err.message === "timeout:5");
		assert.equal(execBodies(d)[0].timeout_ms, 5000);
		assert.equal(out.text(), "partial");
	});
});

test("abort during a run: pi's 'aborted', and the daemon sees the connection close", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		execAnswers(d, (res) => {
			ndjson(res);
			res.write(line({ type: "started", exec: "e" }));
			res.write(line({ type: "stdout", data: b64("working\n") })); // never ends
		});
		const ac = new AbortController();
		const run = createOperations(execDeps(c).deps, () => runContext()).exec("sleep 99", "/var/lib", { onData: () => ac.abort(), signal: ac.signal, env: ENV });
		await assert.rejects(run, (err: Error) => err.message === "aborted");
		assert.equal(await d.cut(), "/v1/exec");
		assert.equal(execBodies(d).length, 1);
	});
});

test("abort between the attempts: the grants are declined, no retry", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		const first = report({ boundaries: [{ attempt: 1, surface: "filesystem", operation: "write_file", path: "/var/lib/x", decision: "allow", source: "reviewer" }], retry: { grants: ["g-1", "g-2"], expires_in_ms: 30_000 } });
		execAnswers(d, stream({ type: "report", report: first }));
		d.on("POST", "/v1/retries/decline", (res) => json(res, 200, { type: "report", report: report() }));
		const ac = new AbortController();
		// The person presses Escape as the first attempt's report lands.
		class AbortingClient extends Client {
			override async exec(req: Parameters<Client["exec"]>[0], onLine: (l: ExecLine) => void, signal?: AbortSignal): Promise<Report> {
				const rep = await super.exec(req, onLine, signal);
				ac.abort();
				return rep;
			}
		}
		const client = new AbortingClient({ socket: d.socket, uid });
		await client.connect();
		const { ui, notes } = recordingUI();
		await assert.rejects(createOperations(execDeps(client).deps, () => runContext({ ui })).exec("make", "/var/lib", { onData: () => {}, signal: ac.signal, env: ENV }), (err: Error) => err.message === "aborted");
		assert.deepEqual(
			d.requests("POST", "/v1/retries/decline").map((s) => JSON.parse(s.body)),
			[{ grants: ["g-1", "g-2"] }],
		);
		assert.equal(execBodies(d).length, 1, "no retry");
		assert.deepEqual(notes, [], "nothing granted is announced");
	});
});

test("an abort before the run: nothing is asked of the daemon", async () => {
	const { deps, asked } = execDeps("never asked");
	const ac = new AbortController();
	ac.abort();
	await assert.rejects(createOperations(deps, () => runContext()).exec("make", "/var/lib", { onData: () => {}, signal: ac.signal }), (err: Error) => err.message === "aborted");
	assert.equal(asked(), 0);
});

/** questionAnswer is an exec that asks one question and, like the
 * daemon, waits for its answer before it reports. */
function questionAnswer(d: FakeDaemon, waitMs: number, extra: Record<string, unknown> = {}): Answer {
	return async (res) => {
		ndjson(res);
		res.write(line({ type: "started", exec: "e" }));
		res.write(
			line({
				type: "question",
				question: {
					id: "q-7",
					surface: "filesystem",
					operation: "write_file",
					path: "/var/lib/app/out",
					command: "make install",
					cwd: "/var/lib/app",
					model: { outcome: "deny", risk_level: "medium", rationale: "outside the workspace", source: "reviewer" },
					created_at: new Date().toISOString(),
					expires_at: new Date(Date.now() + 60_000).toISOString(),
					...extra,
				},
			}),
		);
		let timer: NodeJS.Timeout | undefined;
		await Promise.race([d.next((s) => s.url === "/v1/questions/q-7/answer"), new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
		clearTimeout(timer);
		res.end(line({ type: "report", report: report() }));
	};
}

test("a question is asked in pi's UI and relayed as the client's answer", { skip: NEEDS_ROOT }, async () => {
	for (const allow of [true, false]) {
		await withDaemon(async (d, c) => {
			d.on("POST", "/v1/questions/q-7/answer", (res) => json(res, 200, { answered: true }));
			execAnswers(d, questionAnswer(d, 2_000));
			const { ui, asked } = recordingUI(allow);
			const got = await createOperations(execDeps(c).deps, () => runContext({ ui })).exec("make install", "/var/lib/app", { onData: () => {}, env: ENV });
			assert.deepEqual(got, { exitCode: 0 });
			assert.equal(asked.length, 1);
			assert.equal(asked[0].title, "sandboxd: write_file /var/lib/app/out");
			assert.deepEqual(asked[0].options, ["Deny", "Allow once"], "the highlighted first answer is the safe one");
			assert.match(asked[0].message, /Command: make install/);
			assert.match(asked[0].message, /Directory: \/var\/lib\/app/);
			assert.match(asked[0].message, /The model reviewer said deny \(risk medium\): outside the workspace/);
			const left = asked[0].opts?.timeout ?? 0;
			assert.ok(left > 50_000 && left <= 60_000, `the question's own expiry: ${left}`);
			const answers = d.requests("POST", "/v1/questions/q-7/answer").map((s) => JSON.parse(s.body));
			assert.deepEqual(answers, [{ allow, note: allow ? "" : "denied in pi" }]);
			assert.equal(execBodies(d)[0].questions, true);
		});
	}
});

test("a question a client's allow cannot decide: a yes is not sent, a deny is", { skip: NEEDS_ROOT }, async () => {
	for (const yes of [true, false]) {
		await withDaemon(async (d, c) => {
			d.on("POST", "/v1/questions/q-7/answer", (res) => json(res, 200, { answered: true }));
			execAnswers(d, questionAnswer(d, 150, { client_cannot_allow: "the boundary is critical" }));
			// "Deny now" denies; "Leave it open" leaves it for a person at the terminal.
			const { ui, asked } = recordingUI(yes);
			await createOperations(execDeps(c).deps, () => runContext({ ui })).exec("make install", "/var/lib/app", { onData: () => {}, env: ENV });
			assert.match(asked[0].message, /An allow from pi cannot stand for this one \(the boundary is critical\): deny it now, or leave it open/);
			assert.doesNotMatch(asked[0].message, /Allow it once\?/);
			assert.deepEqual(asked[0].options, ["Deny now", "Leave it open"], "no allow is offered");
			await sleep(20);
			const answers = d.requests("POST", "/v1/questions/q-7/answer").map((s) => JSON.parse(s.body));
			assert.deepEqual(answers, yes ? [{ allow: false, note: "denied in pi" }] : [], `yes ${yes}`);
		});
	}
});

test("an answer the daemon refuses (403) is shown to the person", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		d.on("POST", "/v1/questions/q-7/answer", (res) => json(res, 403, { error: { code: "forbidden", message: "a client may not allow a critical boundary" } }));
		execAnswers(d, questionAnswer(d, 2_000));
		const { ui, notes } = recordingUI(true);
		await createOperations(execDeps(c).deps, () => runContext({ ui })).exec("make install", "/var/lib/app", { onData: () => {}, env: ENV });
		for (let i = 0; i < 100 && notes.length === 0; i++) await sleep(5);
		assert.deepEqual(notes, [["sandboxd: the daemon refused: a client may not allow a critical boundary", "warning"]]);
	});
});

test("no UI: questions are not asked for, and one that comes is not answered", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		execAnswers(d, questionAnswer(d, 100));
		const got = await createOperations(execDeps(c).deps, () => runContext()).exec("make install", "/var/lib/app", { onData: () => {}, env: ENV });
		assert.deepEqual(got, { exitCode: 0 });
		assert.equal(execBodies(d)[0].questions, false);
		await sleep(20);
		assert.deepEqual(d.requests("POST", "/v1/questions/q-7/answer"), []);
	});
});

test("a UI that fails to ask answers nothing; the daemon decides", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		execAnswers(d, questionAnswer(d, 100));
		const { ui, asked } = recordingUI(() => Promise.reject(new Error("the dialog was closed")));
		const got = await createOperations(execDeps(c).deps, () => runContext({ ui })).exec("make install", "/var/lib/app", { onData: () => {}, env: ENV });
		assert.deepEqual(got, { exitCode: 0 });
		assert.equal(asked.length, 1);
		await sleep(20);
		assert.deepEqual(d.requests("POST", "/v1/questions/q-7/answer"), []);
	});
});

// ---- the daemon down: embedded `sandboxd run` --------------------------

/** writeFakeSandboxd writes a stand-in for `sandboxd run` in dir: it
 * records its arguments and the intent file, prints a line on each
 * stream, then (by dir/mode) writes dir/report.json to --report, exits
 * without a report, or hangs. */
function writeFakeSandboxd(dir: string): string {
	const bin = path.join(dir, "sandboxd");
	const q = `'${dir.replaceAll("'", "'\\''")}'`;
	fs.writeFileSync(
		bin,
		`#!/bin/sh
dir=${q}
printf '%s\\n' "$@" > "$dir/args"
echo $$ > "$dir/pid"
report= intent= prev=
for a in "$@"; do
	case "$prev" in
	--report) report=$a ;;
	--intent-file) intent=$a ;;
	esac
	prev=$a
done
printf '%s' "$report" > "$dir/report-path"
if [ -n "$intent" ]; then cp "$intent" "$dir/intent"; fi
echo "embedded stdout"
echo "embedded stderr" >&2
case "$(cat "$dir/mode" 2>/dev/null)" in
noreport) exit 3 ;;
hang) sleep 30; exit 0 ;;
esac
cp "$dir/report.json" "$report"
exit 0
`,
		{ mode: 0o755 },
	);
	return bin;
}

/** wsOf is the project an embedded test's commands run in: beside the
 * fake sandboxd, not around it. */
function wsOf(dir: string): string {
	const ws = path.join(dir, "ws");
	fs.mkdirSync(ws, { recursive: true });
	return ws;
}

async function withEmbedded(fn: (dir: string, bin: string) => Promise<void>): Promise<void> {
	const dir = tempDir("embedded");
	try {
		await fn(dir, writeFakeSandboxd(dir));
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
}

test("the daemon down: `sandboxd run --no-daemon` runs the command, and the user is told once", async () => {
	await withEmbedded(async (dir, bin) => {
		fs.writeFileSync(path.join(dir, "report.json"), JSON.stringify(report({ exit_code: 6 })));
		const { deps, warnCalls, warned } = execDeps("connect ENOENT /run/sandboxd/sandboxd.sock", bin);
		const out = output();
		const cmd = "make -C 'a dir' test";
		const got = await createOperations(deps, () => runContext()).exec(cmd, wsOf(dir), { onData: out.onData, env: ENV, timeout: 5 });
		assert.deepEqual(got, { exitCode: 6 });
		const args = fs.readFileSync(path.join(dir, "args"), "utf8").split("\n").slice(0, -1);
		const reportPath = fs.readFileSync(path.join(dir, "report-path"), "utf8");
		assert.deepEqual(args.slice(0, 8), ["run", "--no-daemon", "--agent", "pi", "--retries", "1", "--report", reportPath]);
		assert.deepEqual(args.slice(-2), ["-c", cmd]);
		const flag = (name: string) => args[args.indexOf(name) + 1];
		assert.equal(flag("--session"), "sess-1");
		assert.equal(flag("--timeout"), "5000ms");
		assert.equal(fs.readFileSync(path.join(dir, "intent"), "utf8"), "build the project", "the intent, through a file");
		assert.equal(fs.existsSync(path.dirname(reportPath)), false, "the report's directory is removed");
		assert.match(out.text(), /embedded stdout/);
		assert.match(out.text(), /embedded stderr/);

		await createOperations(deps, () => runContext({ sessionId: "", intent: "" })).exec("true", wsOf(dir), { onData: () => {}, env: ENV });
		const bare = fs.readFileSync(path.join(dir, "args"), "utf8").split("\n");
		for (const f of ["--session", "--intent-file", "--timeout"]) assert.equal(bare.includes(f), false, f);

		assert.deepEqual(warnCalls, ["daemon-down", "daemon-down"], "one key for every run");
		assert.equal(warned.length, 1, "so the user is told once");
		assert.match(warned[0], /the daemon is not running \(connect ENOENT/);
		assert.match(warned[0], /sandboxd run/);
		assert.match(warned[0], /still sandboxed/);
	});
});

test("embedded: denials are counted and not told twice (sandboxd run says them), a timed-out run throws pi's timeout error", async () => {
	await withEmbedded(async (dir, bin) => {
		const denial = { attempt: 1, surface: "filesystem", operation: "write_file", path: "/etc/passwd", decision: "deny" as const, source: "policy" };
		fs.writeFileSync(path.join(dir, "report.json"), JSON.stringify(report({ exit_code: 1, boundaries: [denial] })));
		const run = runContext();
		const out = output();
		assert.deepEqual(await createOperations(execDeps("down", bin).deps, () => run).exec("x", wsOf(dir), { onData: out.onData, env: ENV }), { exitCode: 1 });
		assert.doesNotMatch(out.text(), /denied by your sandboxd policy/, "sandboxd run's own stderr says it");
		assert.match(out.text(), /embedded stderr/);
		assert.deepEqual(run.denials, { count: 1, faults: 0 }, "the tool's result is still an error for the model");
		fs.writeFileSync(path.join(dir, "report.json"), JSON.stringify(report({ exit_code: 124, timed_out: true })));
		await assert.rejects(createOperations(execDeps("down", bin).deps, () => runContext()).exec("sleep 9", wsOf(dir), { onData: () => {}, env: ENV, timeout: 2 }), (err: Error) => err.message === "timeout:2");
	});
});

test("embedded: sandboxd missing, the command is not run and the error says so", async () => {
	await withEmbedded(async (dir) => {
		const marker = path.join(dir, "marker");
		const out = output();
		await assert.rejects(
			createOperations(execDeps("down", path.join(dir, "no-such-sandboxd")).deps, () => runContext()).exec(`touch '${marker}'`, wsOf(dir), { onData: out.onData, env: ENV }),
			/sandboxd is not installed where pi looks .*SANDBOXD_BIN.*the command was not run/,
		);
		assert.equal(fs.existsSync(marker), false, "the command did not run");
		assert.equal(out.text(), "");
		// Not executable: not started either.
		const notExec = path.join(dir, "not-exec");
		fs.writeFileSync(notExec, "#!/bin/sh\ntouch marker\n", { mode: 0o644 });
		await assert.rejects(createOperations(execDeps("down", notExec).deps, () => runContext()).exec(`touch '${marker}'`, wsOf(dir), { onData: () => {}, env: ENV }), /could not be started.*the command was not run/);
		assert.equal(fs.existsSync(marker), false);
	});
});

test("embedded: sandboxd is looked up in PATH's absolute directories outside the project only", async () => {
	// A PATH with an empty or relative entry (":/usr/bin", a slip of
	// PATH=$EXTRA:$PATH), or with a directory of the project (direnv's
	// PATH_add bin), would find a sandboxd the model's sandboxed commands
	// left there (or a link to /bin/sh) and run the next command bare.
	await withEmbedded(async (dir, bin) => {
		fs.writeFileSync(path.join(dir, "report.json"), JSON.stringify(report()));
		const ws = path.join(dir, "ws");
		fs.mkdirSync(path.join(ws, "bin"), { recursive: true });
		const marker = path.join(dir, "planted-ran");
		for (const planted of [path.join(ws, "sandboxd"), path.join(ws, "bin", "sandboxd")]) {
			fs.writeFileSync(planted, `#!/bin/sh\n/usr/bin/touch '${marker}'\n`, { mode: 0o755 });
		}
		fs.mkdirSync(path.join(ws, ".git"));
		fs.mkdirSync(path.join(ws, "sub", "linked"), { recursive: true });
		fs.symlinkSync("/bin/sh", path.join(ws, "sub", "linked", "sandboxd"));
		const cwd = path.join(ws, "sub");
		fs.writeFileSync(path.join(cwd, "sandboxd"), `#!/bin/sh\n/usr/bin/touch '${marker}'\n`, { mode: 0o755 });
		for (const PATH of [":/nonexistent", "/nonexistent::/usr/bin", ".:/usr/bin", "bin:/usr/bin", `${ws}/bin:/usr/bin`, `${cwd}/linked:/usr/bin`, `${ws}:/usr/bin`]) {
			await assert.rejects(
				createOperations(execDeps("down", "sandboxd").deps, () => runContext()).exec("true", cwd, { onData: () => {}, env: { ...ENV, PATH } }),
				/sandboxd is not installed where pi looks .*SANDBOXD_BIN.*the command was not run/,
				PATH,
			);
			assert.equal(fs.existsSync(marker), false, `PATH=${PATH}: the workspace's sandboxd ran`);
		}
		for (const rel of ["./sandboxd", "bin/sandboxd"]) {
			await assert.rejects(createOperations(execDeps("down", rel).deps, () => runContext()).exec("true", cwd, { onData: () => {}, env: ENV }), /must be an absolute path/);
			assert.equal(fs.existsSync(marker), false, `SANDBOXD_BIN=${rel}: the workspace's sandboxd ran`);
		}
		await assert.rejects(
			createOperations(execDeps("down", path.join(ws, "bin", "sandboxd")).deps, () => runContext()).exec("true", cwd, { onData: () => {}, env: ENV }),
			/is in the project pi works in .*the command was not run/,
		);
		assert.equal(fs.existsSync(marker), false, "SANDBOXD_BIN in the project ran");
		// Found in an absolute PATH directory: run.
		const got = await createOperations(execDeps("down", "sandboxd").deps, () => runContext()).exec("true", cwd, {
			onData: () => {},
			env: { ...ENV, PATH: `:/nonexistent:${ws}/bin:${path.dirname(bin)}:/usr/bin:/bin` },
		});
		assert.deepEqual(got, { exitCode: 0 });
		assert.equal(fs.existsSync(marker), false);
	});
});

test("embedded: sandboxd that ends without a report is an error", async () => {
	await withEmbedded(async (dir, bin) => {
		fs.writeFileSync(path.join(dir, "mode"), "noreport");
		await assert.rejects(createOperations(execDeps("down", bin).deps, () => runContext()).exec("true", wsOf(dir), { onData: () => {}, env: ENV }), /sandboxd run ended with status 3 and no report: the command may not have run/);
	});
});

test("embedded: abort ends sandboxd's process group", async () => {
	await withEmbedded(async (dir, bin) => {
		fs.writeFileSync(path.join(dir, "mode"), "hang");
		const ac = new AbortController();
		const start = Date.now();
		const run = createOperations(execDeps("down", bin).deps, () => runContext()).exec("sleep 30", wsOf(dir), {
			onData: (b) => {
				if (b.toString().includes("embedded stdout")) ac.abort();
			},
			signal: ac.signal,
			env: ENV,
		});
		await assert.rejects(run, (err: Error) => err.message === "aborted");
		assert.ok(Date.now() - start < 2_500, `took ${Date.now() - start} ms`);
		// Every process of the group has ended: a zombie left for init to
		// reap (slowly, in some containers) has ended too.
		const pgid = Number(fs.readFileSync(path.join(dir, "pid"), "utf8"));
		const alive = () => liveInGroup(pgid).length > 0;
		for (let i = 0; i < 100 && alive(); i++) await sleep(10);
		assert.deepEqual(liveInGroup(pgid), [], "the whole group is gone");
	});
});

/** liveInGroup are the processes of group pgid that have not ended. */
function liveInGroup(pgid: number): string[] {
	const out: string[] = [];
	for (const p of fs.readdirSync("/proc")) {
		if (!/^\d+$/.test(p)) continue;
		let stat: string;
		try {
			stat = fs.readFileSync(`/proc/${p}/stat`, "utf8");
		} catch {
			continue; // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
		const [state, , group] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
		if (Number(group) === pgid && state !== "Z" && state !== "X") out.push(`${p} ${state}`);
	}
	return out;
}

test("pi's timeout bounds the command, retry included: the retry gets what is left, or none and the grants are declined", { skip: NEEDS_ROOT }, async () => {
	const held = () =>
		report({
			boundaries: [{ attempt: 1, surface: "filesystem", operation: "write_file", path: "/var/lib/x", decision: "allow", source: "reviewer" }],
			retry: { grants: ["g-1"], expires_in_ms: 30_000 },
		});
	const slow = (ms: number, rep: Report): Answer => async (res) => {
		ndjson(res);
		await sleep(ms);
		res.end(line({ type: "report", report: rep }));
	};
	await withDaemon(async (d, c) => {
		execAnswers(d, slow(300, held()), stream({ type: "report", report: report({ attempts: 2 }) }));
		await createOperations(execDeps(c).deps, () => runContext()).exec("make", "/var/lib", { onData: () => {}, env: ENV, timeout: 5 });
		const [one, two] = execBodies(d);
		assert.equal(one.timeout_ms, 5000);
		assert.ok(typeof two.timeout_ms === "number" && two.timeout_ms > 0 && two.timeout_ms <= 4700, `the retry's time: ${two.timeout_ms}`);
	});
	await withDaemon(async (d, c) => {
		execAnswers(d, slow(300, held()));
		d.on("POST", "/v1/retries/decline", (res) => json(res, 200, { type: "report", report: report() }));
		await assert.rejects(
			createOperations(execDeps(c).deps, () => runContext()).exec("make", "/var/lib", { onData: () => {}, env: ENV, timeout: 0.2 }),
			(err: Error) => err.message === "timeout:0.2",
		);
		assert.equal(execBodies(d).length, 1, "no retry past the deadline");
		assert.deepEqual(d.requests("POST", "/v1/retries/decline").map((s) => JSON.parse(s.body)), [{ grants: ["g-1"] }]);
	});
});

test("what a command or a reviewer wrote reaches pi's UI with no control sequence", { skip: NEEDS_ROOT }, async () => {
	await withDaemon(async (d, c) => {
		d.on("POST", "/v1/questions/q-7/answer", (res) => json(res, 200, { answered: true }));
		execAnswers(
			d,
			questionAnswer(d, 2_000, {
				path: "/var/lib/app/\u001b[2J\u001b]0;pwned\u0007out",
				command: "echo \u001b[31mred\u202e\u009b1m",
				model: { outcome: "deny", risk_level: "medium", rationale: "fine\r\u001b[1Aallow", source: "reviewer" },
			}),
		);
		const { ui, asked } = recordingUI(false);
		await createOperations(execDeps(c).deps, () => runContext({ ui })).exec("make install", "/var/lib/app", { onData: () => {}, env: ENV });
		assert.equal(asked.length, 1);
		for (const text of [asked[0].title, asked[0].message]) {
			assert.doesNotMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/, JSON.stringify(text));
		}
		assert.match(asked[0].title, /\\u\{1b\}\[2J/);
	});
});

test("a question's text cannot be forged by the command, a path or the reviewer: one line each, bounded, the boundary asked about last", { skip: NEEDS_ROOT }, async () => {
	// A command (or a file name, or a rationale the reviewer was talked
	// into) with line breaks could draw lines of its own in the dialog
	// ("Allow it once?", another boundary), and a long one could push the
	// boundary asked about out of sight above them.
	const forged = "\nsandboxd: write_file /var/lib/app/notes.txt\nDirectory: /var/lib/app\nAn allow from pi cannot stand for this one (critical). Deny it now?";
	await withDaemon(async (d, c) => {
		d.on("POST", "/v1/questions/q-7/answer", (res) => json(res, 200, { answered: true }));
		execAnswers(
			d,
			questionAnswer(d, 2_000, {
				path: `/var/lib/app/out${forged}`,
				command: `echo x > /var/lib/app/out; ${"#".repeat(20_000)}${"\n".repeat(300)}${forged}`,
				model: { outcome: "deny", risk_level: "medium", rationale: `outside the workspace${forged}`, source: "reviewer" },
			}),
		);
		const { ui, asked } = recordingUI(false);
		await createOperations(execDeps(c).deps, () => runContext({ ui })).exec("make install", "/var/lib/app", { onData: () => {}, env: ENV });
		assert.equal(asked.length, 1);
		const { title, message } = asked[0];
		assert.doesNotMatch(title, /\n/, "the title is one line");
		assert.ok(title.startsWith("sandboxd: write_file /var/lib/app/out"), title);
		const lines = message.split("\n");
		assert.deepEqual(
			lines.map((l) => l.split(":")[0].split(" ").slice(0, 3).join(" ")),
			["Command", "Directory", "The model reviewer", "It asks to", "Allow it once?"],
			message,
		);
		assert.equal(lines.at(-1), "Allow it once?");
		assert.ok(lines[3].startsWith("It asks to write_file /var/lib/app/out"), lines[3]);
		assert.ok(message.length < 2_500, `the dialog is bounded: ${message.length} characters`);
		assert.match(lines[0], /characters left out/);
		assert.match(lines[0], /Deny it now\?$/, "the command's end is shown too");
	});
});

