// The authorizer link "sandboxd" (src/authorizer.ts) against a stub of
// pi-permission-system's authorizer contract, written from the contract
// as the issue and the brief state it (registerAuthorizer(name, fn)
// answers a disposer and throws on a duplicate name; authorize(details,
// query, log) resolves allow, deny with a reason, or defer).

import assert from "node:assert/strict";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { type AskDetails, type AuthorizerLog, createAuthorize, kindOf, type LinkDeps, LINK_NAME, pathsOf, type PermissionsService, registerLink, shellTool, type Verdict, wholeCommand } from "../src/authorizer.ts";
import { checkDecision, Client, DaemonError, type Decision } from "../src/daemon.ts";
import { FakeDaemon, NEEDS_ROOT } from "./fake-daemon.ts";

type AuthorizeFn = (details: AskDetails, query: unknown, log: AuthorizerLog) => Promise<Verdict>;

// ---- the stub permission system --------------------------------------

/** stubService is a PermissionsService of the seam's era (20.9+): one
 * link per name, an identity-guarded disposer, a plain Error on a
 * duplicate (with a code, when withCode: the shape some forks have). */
function stubService(opts: { withCode?: boolean } = {}) {
	const links = new Map<string, AuthorizeFn>();
	const calls: { name: string; fn: AuthorizeFn }[] = [];
	return {
		links,
		calls,
		checkPermission: () => ({ toolName: "bash", state: "ask", source: "rule", origin: "global" }),
		getToolPermission: () => "ask",
		registerToolInputFormatter: () => () => {},
		registerToolAccessExtractor: () => () => {},
		registerAuthorizer(name: string, fn: AuthorizeFn): () => void {
			calls.push({ name, fn });
			if (links.has(name)) {
				const err = new Error(`An authorizer is already registered for '${name}'.`);
				if (opts.withCode) (err as Error & { code: string }).code = "AUTHORIZER_ALREADY_REGISTERED";
				throw err;
			}
			links.set(name, fn);
			return () => {
				if (links.get(name) === fn) links.delete(name);
			};
		},
	};
}

/** The installed 20.7.3's service: no registerAuthorizer. */
function serviceWithoutSeam() {
	return {
		checkPermission: () => ({ toolName: "bash", state: "ask" }),
		getToolPermission: () => "ask",
		registerToolInputFormatter: () => () => {},
		registerToolAccessExtractor: () => () => {},
	};
}

/** A recording log, as the chain passes one (review and debug). */
function recordingLog() {
	const events: { event: string; details?: Record<string, unknown> }[] = [];
	return {
		events,
		log: {
			review: (event: string, details?: Record<string, unknown>) => void events.push({ event, details }),
			debug: () => {},
		} as AuthorizerLog,
	};
}

const query = { checkPermission: () => ({ state: "ask" }), getToolPermission: () => "ask" };

// ---- the link's dependencies, recorded -------------------------------

const SESSION = "sess-1";
const CWD = "/var/lib/sandboxd-pi-tests/project";

type Reviewed = { req: Record<string, unknown>; cwd: string; signal: AbortSignal };

function linkDeps(over: Partial<LinkDeps> = {}) {
	const reviews: Reviewed[] = [];
	const checks: Reviewed[] = [];
	const served: string[] = [];
	const deps: LinkDeps = {
		review: async (req, cwd, signal) => {
			reviews.push({ req: req as Record<string, unknown>, cwd, signal });
			return { outcome: "allow", rationale: "fits the request", source: "reviewer" };
		},
		check: async (req, cwd, signal) => {
			checks.push({ req: req as Record<string, unknown>, cwd, signal });
			return { denied: false, why: "" };
		},
		servesSession: (s) => {
			served.push(s);
			return true;
		},
		intent: (s) => (s === SESSION ? "build the project and run its tests" : ""),
		cwd: (s) => (s === SESSION ? CWD : ""),
		onError: "defer",
		timeoutMs: 2_000,
		...over,
	};
	// Wrap the overrides so their calls are recorded too.
	const review = deps.review;
	const check = deps.check;
	const serves = deps.servesSession;
	if (over.review) deps.review = (req, cwd, signal) => (reviews.push({ req: req as Record<string, unknown>, cwd, signal }), review(req, cwd, signal));
	if (over.check) deps.check = (req, cwd, signal) => (checks.push({ req: req as Record<string, unknown>, cwd, signal }), check(req, cwd, signal));
	if (over.servesSession) deps.servesSession = (s) => (served.push(s), serves(s));
	return { deps, reviews, checks, served };
}

// ---- asks, in the shape of the contract ------------------------------

/** bashAsk is the permission system's ask for the bash gate: the unit it
 * split out in details.command and request.value, the whole command in
 * the evidence "full command" (only when it differs). */
function bashAsk(unit: string, full?: string, over: Record<string, unknown> = {}): AskDetails {
	return {
		requestId: "req-bash-1",
		source: "tool_call",
		agentName: null,
		toolCallId: "call-1",
		toolName: "bash",
		command: unit,
		payload: {
			kind: "bash",
			request: {
				requester: { agentName: null, forwarded: false, sessionId: null },
				surface: "bash",
				toolName: "bash",
				invokedToolName: "bash",
				value: unit,
				matchedPattern: "*",
				commandContext: null,
				executedUnit: null,
			},
			evidence: full === undefined ? [] : [{ label: "full command", text: full, detail: null }],
			annotations: [],
		},
		...over,
	} as AskDetails;
}

/** pathAsk is an ask of the path family for a tool of pi's own. */
function pathAsk(kind: string, toolName: string, p: string, over: Record<string, unknown> = {}): AskDetails {
	return {
		requestId: "req-path-1",
		source: "tool_call",
		agentName: null,
		toolCallId: "call-2",
		toolName,
		path: p,
		payload: {
			kind,
			request: { requester: { agentName: null, forwarded: false, sessionId: null }, surface: kind, toolName, value: p, matchedPattern: "*" },
			evidence: [],
			annotations: [],
		},
		...over,
	} as AskDetails;
}

function isVerdict(v: unknown): v is Verdict {
	const k = (v as { kind?: unknown } | null)?.kind;
	if (k === "allow" || k === "defer") return true;
	return k === "deny" && typeof (v as { reason?: unknown }).reason === "string";
}

// ---- registerLink ------------------------------------------------------

test("registerLink registers the link once under 'sandboxd' and hands back its disposer", async () => {
	const svc = stubService();
	const { deps } = linkDeps();
	const authorize = createAuthorize(SESSION, deps) as AuthorizeFn;
	const got = registerLink(svc, authorize);
	assert.equal(got.state, "registered");
	assert.deepEqual(
		svc.calls.map((c) => c.name),
		[LINK_NAME],
	);
	assert.equal(LINK_NAME, "sandboxd");
	assert.equal(svc.links.get("sandboxd"), authorize);
	// The chain calls what was registered.
	const verdict = await svc.links.get("sandboxd")!(bashAsk("make test"), query, recordingLog().log);
	assert.deepEqual(verdict, { kind: "allow" });
	if (got.state !== "registered") return;
	got.dispose();
	assert.equal(svc.links.has("sandboxd"), false, "the disposer unregisters the link");
	got.dispose(); // twice: harmless
	const again = registerLink(svc, authorize);
	assert.equal(again.state, "registered", "after dispose the name is free again");
});

test("registerLink: a duplicate is done, whether the error has a code or not", () => {
	for (const withCode of [false, true]) {
		const svc = stubService({ withCode });
		const authorize = createAuthorize(SESSION, linkDeps().deps) as AuthorizeFn;
		assert.equal(registerLink(svc, authorize).state, "registered");
		// permissions:ready fires again: the same name is registered again.
		assert.deepEqual(registerLink(svc, authorize), { state: "already" }, `withCode ${withCode}`);
		assert.equal(svc.links.get("sandboxd"), authorize, "the first registration stays");
		assert.equal(svc.calls.length, 2);
	}
});

test("registerLink: another error from registerAuthorizer is not swallowed", () => {
	const svc = {
		registerAuthorizer() {
			throw new TypeError("the registry is closed");
		},
	};
	assert.throws(() => registerLink(svc, createAuthorize(SESSION, linkDeps().deps) as AuthorizeFn), /the registry is closed/);
});

test("registerLink: a service without the seam (20.7.3) and no service at all", () => {
	const svc = serviceWithoutSeam() as unknown as PermissionsService;
	assert.deepEqual(registerLink(svc, createAuthorize(SESSION, linkDeps().deps) as AuthorizeFn), { state: "no-seam" });
	assert.deepEqual(registerLink(undefined, createAuthorize(SESSION, linkDeps().deps) as AuthorizeFn), { state: "no-service" });
});

test("registerLink: a registerAuthorizer that answers no disposer still registers", () => {
	const svc = { registerAuthorizer: () => undefined as unknown as () => void };
	const got = registerLink(svc, createAuthorize(SESSION, linkDeps().deps) as AuthorizeFn);
	assert.equal(got.state, "registered");
	if (got.state === "registered") got.dispose();
});

// ---- bash asks -----------------------------------------------------------

test("bash: allowed only when sandboxd's bash tool serves the session; else defer and no review", async () => {
	const { deps, reviews, served } = linkDeps({ servesSession: () => false });
	const { events, log } = recordingLog();
	const verdict = await createAuthorize(SESSION, deps)(bashAsk("rm -rf build"), query, log);
	assert.deepEqual(verdict, { kind: "defer" });
	assert.equal(reviews.length, 0, "the daemon is not asked about a command that would run bare");
	assert.deepEqual(served, [SESSION]);
	assert.ok(events.some((e) => e.event === "sandboxd_link_defer" && e.details?.requestId === "req-bash-1"), JSON.stringify(events));
});

test("bash: a shell alias gated as bash (shellTools: exec_command) runs bare: defer, and no review", async () => {
	// pi-permission-system gates another extension's shell tool at parity
	// with bash (kind "bash"), naming the tool called in invokedToolName;
	// that tool runs the command itself, outside any sandbox, however
	// well sandboxd's own bash tool serves the session.
	const asks: { name: string; d: AskDetails }[] = [
		{ name: "invokedToolName", d: bashAsk("make", undefined, { payload: { ...(bashAsk("make").payload as object), request: { ...bashRequest("make"), invokedToolName: "exec_command" } } }) },
		{ name: "request.toolName", d: bashAsk("make", undefined, { payload: { ...(bashAsk("make").payload as object), request: { ...bashRequest("make"), toolName: "exec_command", invokedToolName: null } } }) },
		{ name: "details.toolName", d: bashAsk("make", undefined, { toolName: "shell" }) },
		{ name: "no tool named at all", d: bashAsk("make", undefined, { toolName: undefined, payload: { ...(bashAsk("make").payload as object), request: { ...bashRequest("make"), toolName: undefined, invokedToolName: undefined } } }) },
		{ name: "a name that is not a string", d: bashAsk("make", undefined, { toolName: 7 }) },
	];
	for (const { name, d } of asks) {
		const { deps, reviews } = linkDeps();
		const { events, log } = recordingLog();
		assert.deepEqual(await createAuthorize(SESSION, deps)(d, query, log), { kind: "defer" }, name);
		assert.equal(reviews.length, 0, name);
		assert.ok(events.some((e) => e.event === "sandboxd_link_defer"), `${name}: ${JSON.stringify(events)}`);
	}
	// pi's own bash, named as the contract names it (invokedToolName null: the same tool).
	const own = bashAsk("make", undefined, { payload: { ...(bashAsk("make").payload as object), request: { ...bashRequest("make"), invokedToolName: null } } });
	assert.equal(shellTool(own), "bash");
	assert.deepEqual(await createAuthorize(SESSION, linkDeps().deps)(own, query, recordingLog().log), { kind: "allow" });
});

function bashRequest(unit: string): Record<string, unknown> {
	return (bashAsk(unit).payload as { request: Record<string, unknown> }).request;
}

test("bash: the whole command goes to the daemon's review with the intent, as a command boundary", async () => {
	const { deps, reviews } = linkDeps();
	const { events, log } = recordingLog();
	const verdict = await createAuthorize(SESSION, deps)(bashAsk("rm -rf build", "make clean && rm -rf build && make"), query, log);
	assert.deepEqual(verdict, { kind: "allow" });
	assert.equal(reviews.length, 1);
	assert.deepEqual(reviews[0].req, {
		command: "make clean && rm -rf build && make",
		surface: "command",
		operation: "run",
		session: SESSION,
		intent: "build the project and run its tests",
		agent: "pi",
	});
	assert.equal(reviews[0].cwd, CWD);
	assert.ok(events.some((e) => e.event === "sandboxd_link_allow"));
});

test("wholeCommand: evidence 'full command' beats details.command, which beats request.value", async () => {
	const cases: { name: string; d: AskDetails; want: string }[] = [
		{ name: "all three", d: bashAsk("rm x", "cd a && rm x"), want: "cd a && rm x" },
		{ name: "label in other case", d: evidence([{ label: "Full Command", text: "cd a && rm x" }]), want: "cd a && rm x" },
		{ name: "no evidence", d: bashAsk("rm x"), want: "rm x" },
		{ name: "empty evidence text", d: evidence([{ label: "full command", text: "" }]), want: "rm x" },
		{ name: "other evidence only", d: evidence([{ label: "matched rule", text: "rm *" }]), want: "rm x" },
		{ name: "evidence not a list", d: { ...bashAsk("rm x"), payload: { ...(bashAsk("rm x").payload as object), evidence: "cd a && rm x" } }, want: "rm x" },
		{ name: "garbage evidence entries", d: evidence([null, 7, "x", [], { label: 5, text: "y" }, { label: "full command", text: 9 }]), want: "rm x" },
		{ name: "request.value only", d: { ...bashAsk("rm x"), command: undefined }, want: "rm x" },
		{ name: "details.command not a string", d: { ...bashAsk("rm x"), command: 42 }, want: "rm x" },
		{ name: "nothing", d: { payload: { kind: "bash" } }, want: "" },
	];
	for (const c of cases) {
		assert.equal(wholeCommand(c.d), c.want, c.name);
		if (c.want === "") continue;
		const { deps, reviews } = linkDeps();
		await createAuthorize(SESSION, deps)(c.d, query, recordingLog().log);
		assert.equal(reviews[0]?.req.command, c.want, `${c.name}: reviewed`);
	}

	function evidence(ev: unknown[]): AskDetails {
		const d = bashAsk("rm x");
		return { ...d, payload: { ...(d.payload as object), evidence: ev } };
	}
});

test("bash: no command to review, or no directory to run it in: defer without a review", async () => {
	for (const d of [{ payload: { kind: "bash" } }, bashAsk("")]) {
		const { deps, reviews } = linkDeps();
		assert.deepEqual(await createAuthorize(SESSION, deps)(d, query, recordingLog().log), { kind: "defer" });
		assert.equal(reviews.length, 0);
	}
	const { deps, reviews } = linkDeps({ cwd: () => "" });
	assert.deepEqual(await createAuthorize(SESSION, deps)(bashAsk("make"), query, recordingLog().log), { kind: "defer" });
	assert.equal(reviews.length, 0);
});

test("bash: the broker's deny is a deny whose reason names who decided", async () => {
	for (const [source, who] of [
		["reviewer", "the model reviewer"],
		["policy", "your sandboxd policy"],
		["hard-deny", "sandboxd's fixed rules"],
		["human", "a person at the terminal"],
		["circuit-breaker", "circuit breaker"],
	]) {
		const { deps } = linkDeps({ review: async () => ({ outcome: "deny", rationale: "it deletes the user's files", source }) });
		const { events, log } = recordingLog();
		const v = await createAuthorize(SESSION, deps)(bashAsk("rm -rf ~"), query, log);
		assert.equal(v.kind, "deny", source);
		if (v.kind !== "deny") continue;
		assert.ok(v.reason.includes(who), `${source}: ${v.reason}`);
		assert.match(v.reason, /it deletes the user's files/);
		assert.match(v.reason, /Rephrasing it to do the same will be denied too/);
		assert.ok(events.some((e) => e.event === "sandboxd_link_deny" && e.details?.source === source));
	}
});

test("bash: a reviewer fault (error, no-reviewer) is not a deny: defer, or deny when configured", async () => {
	for (const source of ["error", "no-reviewer"]) {
		for (const onError of ["defer", "deny"] as const) {
			const { deps } = linkDeps({ onError, review: async () => ({ outcome: "deny", rationale: "the model timed out", source }) });
			const { events, log } = recordingLog();
			const v = await createAuthorize(SESSION, deps)(bashAsk("make"), query, log);
			assert.ok(events.some((e) => e.event === "sandboxd_link_failed" && e.details?.answer === onError), `${source}/${onError}`);
			if (onError === "defer") {
				assert.deepEqual(v, { kind: "defer" }, source);
				continue;
			}
			assert.equal(v.kind, "deny", source);
			if (v.kind !== "deny") continue;
			assert.match(v.reason, /could not judge/);
			assert.match(v.reason, /nobody/);
			assert.doesNotMatch(v.reason, /sandboxd denied this command/, "a fault is not called a denial");
		}
	}
});

test("bash: a daemon that is down, or a review that rejects: defer (deny if configured), never allow", async () => {
	const failures: (() => Promise<Decision>)[] = [
		async () => {
			throw new DaemonError("the daemon cannot be reached at /run/sandboxd/sandboxd.sock: ENOENT", { down: true });
		},
		async () => {
			throw new DaemonError("the daemon refused: no such session", { status: 400 });
		},
		() => {
			throw new Error("thrown before a promise");
		},
		() => Promise.reject("a string, not an Error"),
		() => Promise.reject(undefined),
	];
	for (const [i, review] of failures.entries()) {
		for (const onError of ["defer", "deny"] as const) {
			const { deps } = linkDeps({ onError, review });
			const v = await createAuthorize(SESSION, deps)(bashAsk("make"), query, recordingLog().log);
			assert.equal(v.kind, onError, `failure ${i}`);
		}
	}
});

test("bash: a slow daemon: defer after timeoutMs, and the review's signal is aborted", async () => {
	let seen: AbortSignal | undefined;
	const { deps } = linkDeps({
		timeoutMs: 50,
		review: (_req, _cwd, signal) => {
			seen = signal;
			return new Promise<Decision>(() => {}); // never answers
		},
	});
	const { events, log } = recordingLog();
	const start = Date.now();
	const v = await createAuthorize(SESSION, deps)(bashAsk("make"), query, log);
	const took = Date.now() - start;
	assert.deepEqual(v, { kind: "defer" });
	assert.ok(took >= 45 && took < 1_000, `took ${took} ms`);
	assert.equal(seen?.aborted, true, "the review is told to stop");
	const failed = events.find((e) => e.event === "sandboxd_link_failed");
	assert.match(String(failed?.details?.error), /did not answer within 50 ms/);

	const { deps: denying } = linkDeps({ timeoutMs: 20, onError: "deny", review: () => new Promise<Decision>(() => {}) });
	assert.equal((await createAuthorize(SESSION, denying)(bashAsk("make"), query, log)).kind, "deny");
});

// Garbage from the daemon: the client's checkDecision turns it into a
// DaemonError (so the link sees a rejected review); a Decision that
// reaches the link anyway must not be read as an allow either.
const GARBAGE_DECISIONS: unknown[] = [
	null,
	undefined,
	"allow",
	42,
	[],
	["allow"],
	{},
	{ outcome: "maybe", rationale: "", source: "reviewer" },
	{ outcome: "ALLOW", rationale: "", source: "reviewer" },
	{ outcome: "allow" },
	{ outcome: "allow", rationale: "ok", source: 7 },
	{ outcome: "allow", rationale: 7, source: "reviewer" },
	{ outcome: "deny", rationale: null, source: "reviewer" },
];

test("client layer: checkDecision refuses garbage decisions with a DaemonError", () => {
	for (const g of GARBAGE_DECISIONS) {
		assert.throws(() => checkDecision(g), (err: unknown) => err instanceof DaemonError && /malformed/.test(err.message), JSON.stringify(g) ?? "undefined");
	}
	assert.deepEqual(checkDecision({ outcome: "deny", source: "reviewer" }), { outcome: "deny", source: "reviewer", rationale: "" });
	const full = { outcome: "allow", risk_level: "low", user_authorization: "explicit", rationale: "fine", source: "human" };
	assert.deepEqual(checkDecision(full), full);
});

test("link layer: a garbage Decision from review is a failure (defer, or deny if configured), never an allow", async () => {
	for (const g of GARBAGE_DECISIONS) {
		for (const onError of ["defer", "deny"] as const) {
			const { deps } = linkDeps({ onError, review: async () => g as Decision });
			const { events, log } = recordingLog();
			const v = await createAuthorize(SESSION, deps)(bashAsk("make"), query, log);
			assert.equal(v.kind, onError, `${JSON.stringify(g)} / ${onError}`);
			assert.ok(events.some((e) => e.event === "sandboxd_link_failed"), JSON.stringify(g));
		}
	}
});

test("bash: a forwarded ask is judged for the requesting session", async () => {
	const { deps, reviews, served } = linkDeps();
	const d = bashAsk("make", undefined, { forwarding: { requesterAgentName: "worker", requesterSessionId: "child-7" } });
	// The child's bash tool is not known to serve: defer.
	const { deps: notServing, reviews: none } = linkDeps({ servesSession: (s) => s === SESSION });
	assert.deepEqual(await createAuthorize(SESSION, notServing)(d, query, recordingLog().log), { kind: "defer" });
	assert.equal(none.length, 0);
	assert.deepEqual(await createAuthorize(SESSION, deps)(d, query, recordingLog().log), { kind: "allow" });
	assert.deepEqual(served, ["child-7"]);
	assert.equal(reviews[0].req.session, "child-7");
	assert.equal(reviews[0].cwd, CWD, "the child's directory is unknown: the link's own session's");
});

test("the link over a real client: a daemon that denies, is down, slow, refuses or answers garbage", { skip: NEEDS_ROOT }, async () => {
	const d = await FakeDaemon.start();
	try {
		const client = new Client({ socket: d.socket, uid: process.getuid?.() ?? -1, timeoutMs: 5_000 });
		await client.connect();
		const gone = new Client({ socket: `${d.dir}/gone.sock`, uid: 0 });
		// As the extension wires it: the request's context added, the link's signal passed on.
		const over = (c: Client, onError: "defer" | "deny"): Partial<LinkDeps> => ({
			onError,
			timeoutMs: 100,
			review: (req, cwd, signal) => c.review({ ...req, env: ["PATH=/usr/bin"], cwd, umask: 0o22 }, signal),
			check: (req, cwd, signal) => c.check({ ...req, env: ["PATH=/usr/bin"], cwd, umask: 0o22 }, signal),
		});
		const answer = (status: number, body: string) =>
			d.on("POST", "/v1/review", (res) => {
				res.writeHead(status, { "Content-Type": "application/json" });
				res.end(body);
			});

		answer(200, JSON.stringify({ decision: { outcome: "deny", rationale: "it reads the user's keys", source: "reviewer" } }));
		const denied = await createAuthorize(SESSION, linkDeps(over(client, "defer")).deps)(bashAsk("cat ~/.ssh/id_ed25519"), query, recordingLog().log);
		assert.equal(denied.kind, "deny");
		assert.deepEqual(JSON.parse(d.requests("POST", "/v1/review")[0].body).command, "cat ~/.ssh/id_ed25519");

		const failures: [string, () => void, Client][] = [
			["garbage decision", () => answer(200, '{"decision": {"outcome": "maybe", "rationale": "", "source": "reviewer"}}'), client],
			["not JSON", () => answer(200, "<html>"), client],
			["an array", () => answer(200, "[]"), client],
			["a refusal", () => answer(400, '{"error": {"code": "bad_request", "message": "no such directory"}}'), client],
			["down", () => {}, gone],
			["slow", () => d.on("POST", "/v1/review", () => {}), client],
		];
		for (const [name, set, c] of failures) {
			for (const onError of ["defer", "deny"] as const) {
				set();
				const cut = d.cutOff.length;
				const v = await createAuthorize(SESSION, linkDeps(over(c, onError)).deps)(bashAsk("make"), query, recordingLog().log);
				assert.equal(v.kind, onError, `${name} / ${onError}`);
				if (name === "slow") {
					for (let i = 0; i < 100 && d.cutOff.length === cut; i++) await new Promise((r) => setTimeout(r, 5));
					assert.equal(d.cutOff.length, cut + 1, "the link's timeout hangs up on the daemon");
				}
			}
		}
	} finally {
		await d.stop();
	}
});

// ---- path asks -----------------------------------------------------------

test("path family: deny what sandboxd's rules refuse, defer otherwise, never allow", async () => {
	const kinds = ["path", "external_directory", "bash_external_directory", "path_read", "path_write", "external_directory_read", "external_directory_write"];
	for (const kind of kinds) {
		const refused = linkDeps({
			check: async (req) => ({ denied: req.path === "/root/.ssh/id_ed25519", why: "a secret: sandboxd never lets a tool read it" }),
		});
		const { events, log } = recordingLog();
		const v = await createAuthorize(SESSION, refused.deps)(pathAsk(kind, "write", "/root/.ssh/id_ed25519"), query, log);
		assert.equal(v.kind, "deny", kind);
		if (v.kind === "deny") {
			assert.match(v.reason, /\/root\/\.ssh\/id_ed25519/);
			assert.match(v.reason, /a secret: sandboxd never lets a tool read it/);
		}
		assert.ok(events.some((e) => e.event === "sandboxd_link_deny"), kind);
		assert.equal(refused.reviews.length, 0, "a path is checked, never reviewed");

		const fine = linkDeps();
		assert.deepEqual(await createAuthorize(SESSION, fine.deps)(pathAsk(kind, "write", `${CWD}/src/main.go`), query, log), { kind: "defer" }, kind);
		assert.ok(fine.checks.length > 0, kind);
		for (const c of fine.checks) {
			assert.equal(c.req.surface, "filesystem");
			assert.equal(c.req.session, SESSION);
			assert.equal(c.req.agent, "pi");
			assert.equal(c.cwd, CWD);
		}
	}
});

test("path: the kind may come from accessIntent or the details' surface when there is no payload", async () => {
	for (const d of [
		{ requestId: "r", toolName: "write", accessIntent: { surface: "external_directory_write", matchValues: ["/etc/profile.d/x.sh"], boundaryValue: null } },
		{ requestId: "r", toolName: "write", surface: "path", path: "/etc/profile.d/x.sh" },
	]) {
		assert.notEqual(kindOf(d), "");
		const { deps, checks } = linkDeps({ check: async () => ({ denied: true, why: "a start-up location" }) });
		const v = await createAuthorize(SESSION, deps)(d, query, recordingLog().log);
		assert.equal(v.kind, "deny", JSON.stringify(d));
		assert.equal(checks[0].req.path, "/etc/profile.d/x.sh");
	}
});

test("path: a relative path is resolved against the session's directory", async () => {
	assert.deepEqual(pathsOf({ path: "src/../.env" }, CWD), [`${CWD}/.env`]);
	assert.deepEqual(pathsOf({ path: "./a/b/" }, CWD), [`${CWD}/a/b`]);
	assert.deepEqual(pathsOf({ path: "/abs//x/" }, CWD), ["/abs/x"]);
	assert.deepEqual(pathsOf({ path: "rel" }, ""), [], "no directory: a relative path names nothing");
	assert.deepEqual(pathsOf({ path: "bad\u0000name" }, CWD), []);
	assert.deepEqual(
		pathsOf({ accessIntent: { matchValues: ["/w/a", "a", 7, null], boundaryValue: "/w" } }, "/w"),
		["/w/a", "/w"],
		"every form, duplicates collapsed, garbage left out",
	);

	const { deps, checks } = linkDeps();
	await createAuthorize(SESSION, deps)(pathAsk("path", "edit", "cfg/app.yaml"), query, recordingLog().log);
	assert.ok(checks.length > 0);
	for (const c of checks) assert.equal(c.req.path, `${CWD}/cfg/app.yaml`);

	const noCwd = linkDeps({ cwd: () => "" });
	assert.deepEqual(await createAuthorize(SESSION, noCwd.deps)(pathAsk("path", "edit", "cfg/app.yaml"), query, recordingLog().log), { kind: "defer" });
	assert.equal(noCwd.checks.length, 0);
});

test("path: the spellings pi's file tools read (@ mention, ~, file:// URL, unicode spaces) are checked as the files they name", async () => {
	// pi's read and write drop a leading "@", expand "~", take file://
	// URLs and fold unicode spaces before they touch the file: the link
	// must check that file, whatever the ask's raw path spells.
	const home = os.homedir();
	const secret = path.join(home, ".ssh", "id_rsa");
	for (const raw of ["@~/.ssh/id_rsa", `@${secret}`, `file://${secret}`, `@file://${secret}`, "~/.ssh/id_rsa"]) {
		assert.ok(pathsOf({ path: raw }, CWD).includes(secret), `${raw}: ${JSON.stringify(pathsOf({ path: raw }, CWD))}`);
		const { deps } = linkDeps({ check: async (req) => ({ denied: req.path === secret, why: "credential stores are never opened" }) });
		const v = await createAuthorize(SESSION, deps)(pathAsk("path", "read", raw), query, recordingLog().log);
		assert.equal(v.kind, "deny", `${raw}: ${JSON.stringify(v)}`);
	}
	assert.ok(pathsOf({ path: "~" }, CWD).includes(home));
	assert.ok(pathsOf({ path: "notes\u00a0old.txt" }, CWD).includes(`${CWD}/notes old.txt`));
	assert.ok(pathsOf({ path: "@notes.txt" }, CWD).includes(`${CWD}/@notes.txt`), "the path as given is checked too");
});

test("path: reading tools are checked for a read only, the others for read and write", async () => {
	const ops = async (d: AskDetails) => {
		const { deps, checks } = linkDeps();
		await createAuthorize(SESSION, deps)(d, query, recordingLog().log);
		return checks.map((c) => c.req.operation);
	};
	for (const tool of ["read", "grep", "find", "ls"]) assert.deepEqual(await ops(pathAsk("path", tool, "/etc/hosts")), ["read_file"], tool);
	for (const tool of ["write", "edit", "bash", "some_mcp_tool"]) assert.deepEqual(await ops(pathAsk("path", tool, "/etc/hosts")), ["read_file", "write_file"], tool);
	// The tool's name may be in the request only.
	const d = pathAsk("path", "read", "/etc/hosts");
	assert.deepEqual(await ops({ ...d, toolName: undefined }), ["read_file"]);
	// A read member of the surface is a read, whoever reads.
	assert.deepEqual(await ops(pathAsk("external_directory_read", "bash", "/etc/hosts")), ["read_file"]);
	assert.deepEqual(await ops(pathAsk("path_write", "write", "/etc/hosts")), ["read_file", "write_file"]);
});

test("path: the directional surface in the request decides the operation, whatever the payload's kind", async () => {
	// The payload's kind is the family ("path"); since 27.1 the gate's
	// directional surface is in request.surface and accessIntent.surface.
	const ops = async (d: AskDetails) => {
		const { deps, checks } = linkDeps();
		await createAuthorize(SESSION, deps)(d, query, recordingLog().log);
		return checks.map((c) => c.req.operation);
	};
	const read = pathAsk("path", "bash", "/home/u/.bashrc");
	(read.payload as { request: { surface: string } }).request.surface = "path_read";
	assert.deepEqual(await ops(read), ["read_file"], "bash reading a file is not checked as a write");
	const readIntent = pathAsk("external_directory", "bash", "/home/u/.bashrc", {
		accessIntent: { surface: "external_directory_read", matchValues: ["/home/u/.bashrc"], boundaryValue: null },
	});
	assert.deepEqual(await ops(readIntent), ["read_file"]);
	const write = pathAsk("path", "read", "/home/u/.bashrc");
	(write.payload as { request: { surface: string } }).request.surface = "path_write";
	assert.deepEqual(await ops(write), ["read_file", "write_file"], "a write surface is checked as a write");
});

test("path: a check that fails or hangs: defer (deny if configured), never allow", async () => {
	for (const onError of ["defer", "deny"] as const) {
		const down = linkDeps({
			onError,
			check: async () => {
				throw new DaemonError("the daemon cannot be reached", { down: true });
			},
		});
		assert.equal((await createAuthorize(SESSION, down.deps)(pathAsk("path", "write", "/x"), query, recordingLog().log)).kind, onError);
		const slow = linkDeps({ onError, timeoutMs: 20, check: () => new Promise(() => {}) });
		assert.equal((await createAuthorize(SESSION, slow.deps)(pathAsk("path", "write", "/x"), query, recordingLog().log)).kind, onError);
	}
});

// ---- everything else -----------------------------------------------------

test("unknown kinds (tool, mcp, skill, ...) defer without asking the daemon", async () => {
	for (const kind of ["tool", "mcp", "skill", "skill_read", "forwarded", "something_new", ""]) {
		const { deps, reviews, checks } = linkDeps();
		const d = { ...pathAsk(kind, "write", "/etc/passwd"), command: "rm -rf /" };
		assert.deepEqual(await createAuthorize(SESSION, deps)(d, query, recordingLog().log), { kind: "defer" }, kind);
		assert.equal(reviews.length + checks.length, 0, kind);
	}
});

test("malformed details defer and never throw", async () => {
	const malformed: unknown[] = [
		null,
		undefined,
		0,
		42,
		Number.NaN,
		"bash",
		true,
		[],
		[1, 2],
		["bash"],
		{},
		{ payload: null },
		{ payload: 7 },
		{ payload: [] },
		{ payload: { kind: 7 } },
		{ payload: { kind: ["bash"] } },
		{ payload: { kind: "bash", request: null, evidence: 5 } },
		{ payload: { kind: "bash" }, command: 42 },
		{ payload: { kind: "bash" }, command: ["ls"] },
		{ payload: { kind: "path" }, path: 12 },
		{ payload: { kind: "path" }, accessIntent: { matchValues: "x" } },
		{ payload: { kind: "path", request: { value: { p: 1 } } } },
		{ accessIntent: 5, surface: 9 },
		{ forwarding: 3, payload: { kind: "bash", request: { requester: 5 } } },
	];
	for (const d of malformed) {
		const { deps, reviews } = linkDeps();
		const v = await createAuthorize(SESSION, deps)(d as AskDetails, query, recordingLog().log);
		assert.deepEqual(v, { kind: "defer" }, String(JSON.stringify(d)));
		assert.equal(reviews.length, 0);
	}
});

test("a log that throws, or is no log, does not change the verdict", async () => {
	const logs: unknown[] = [
		{
			review() {
				throw new Error("the log's disk is full");
			},
			debug() {
				throw new Error("no");
			},
		},
		undefined,
		null,
		{},
		{ review: "not a function" },
	];
	for (const log of logs) {
		const allowing = linkDeps();
		assert.deepEqual(await createAuthorize(SESSION, allowing.deps)(bashAsk("make"), query, log as AuthorizerLog), { kind: "allow" });
		const denying = linkDeps({ review: async () => ({ outcome: "deny", rationale: "no", source: "reviewer" }) });
		assert.equal((await createAuthorize(SESSION, denying.deps)(bashAsk("make"), query, log as AuthorizerLog)).kind, "deny");
		const failing = linkDeps({ review: () => Promise.reject(new Error("down")) });
		assert.deepEqual(await createAuthorize(SESSION, failing.deps)(bashAsk("make"), query, log as AuthorizerLog), { kind: "defer" });
		const notServing = linkDeps({ servesSession: () => false });
		assert.deepEqual(await createAuthorize(SESSION, notServing.deps)(bashAsk("make"), query, log as AuthorizerLog), { kind: "defer" });
	}
});

test("authorize never rejects and never allows what it cannot judge, whatever it is handed", async () => {
	const hostile = new Proxy(
		{},
		{
			get() {
				throw Object.create(null); // not even an Error: no message, no toString
			},
		},
	);
	const throwingGetter = Object.defineProperty({}, "payload", {
		get() {
			throw new Error("a getter that throws");
		},
	});
	const details: unknown[] = [
		bashAsk("make"),
		pathAsk("path", "write", "/x"),
		null,
		42,
		"x",
		[],
		hostile,
		throwingGetter,
		{ payload: hostile },
		{ payload: { kind: "bash", evidence: [hostile] }, command: "make" },
		{ payload: { kind: "path" }, accessIntent: { matchValues: [hostile] } },
		{ forwarding: hostile, payload: { kind: "bash" }, command: "make" },
	];
	const oddErrors: unknown[] = [Object.create(null), hostile, { message: 5 }, Symbol("s"), 0n];
	const depsVariants: Partial<LinkDeps>[] = [
		{},
		{ servesSession: () => false },
		...oddErrors.map((e) => ({ review: () => Promise.reject(e), check: () => Promise.reject(e) })),
		...oddErrors.map((e) => ({
			servesSession: () => {
				throw e;
			},
		})),
		{
			intent: () => {
				throw new Error("no intent");
			},
		},
		{
			cwd: () => {
				throw new Error("no cwd");
			},
		},
		{ review: async () => hostile as Decision, check: async () => hostile as { denied: boolean; why: string } },
		{ review: () => null as unknown as Promise<Decision>, check: () => 7 as unknown as Promise<{ denied: boolean; why: string }> },
	];
	const logs: unknown[] = [recordingLog().log, hostile, { review: () => hostile }];
	let calls = 0;
	for (const over of depsVariants) {
		for (const onError of ["defer", "deny"] as const) {
			const { deps } = linkDeps({ ...over, onError });
			const authorize = createAuthorize(SESSION, deps);
			for (const d of details) {
				for (const log of logs) {
					calls++;
					let v: unknown;
					await assert.doesNotReject(async () => {
						v = await authorize(d as AskDetails, hostile, log as AuthorizerLog);
					}, `call ${calls}`);
					assert.ok(isVerdict(v), `call ${calls}: ${String(JSON.stringify(v))}`);
					const judged = d === details[0] && Object.keys(over).length === 0;
					if (!judged) assert.notEqual((v as Verdict).kind, "allow", `call ${calls}: allowed what it could not judge`);
				}
			}
		}
	}
	assert.ok(calls > 300, `${calls} calls`);
});
